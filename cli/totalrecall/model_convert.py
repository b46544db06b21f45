"""The torch-free converter of `totalrecall model build`: the BERT safetensors and WordPiece
vocabulary of all-MiniLM-L6-v2 written as a GGUF with the gguf-py vendored in the llama-cpp-python
sdist, like llama.cpp's BertModel converter (byte-identical output for this model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .model_files import BuildError

_ST_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path: Path) -> dict[str, Any]:
    """name → numpy array (memory-mapped), in the file's sorted key order (like safe_open)."""
    import numpy as np

    with path.open("rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    base = 8 + n
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    out: dict[str, Any] = {}
    for name in sorted(header):
        spec = header[name]
        dtype = _ST_DTYPES.get(spec["dtype"])
        if dtype is None:
            raise BuildError(f"unsupported safetensors dtype {spec['dtype']} for {name}")
        start, end = spec["data_offsets"]
        arr = mm[base + start:base + end].view(dtype).reshape(spec["shape"])
        out[name] = arr
    return out


def convert_numpy(model_dir: Path, out: Path, outtype: str) -> None:
    """BERT → GGUF like llama.cpp's BertModel converter, without torch/transformers.
    Must run with the vendored gguf-py first on sys.path (see `_numpy_convert_subprocess`)."""
    import gguf  # the vendored one

    hp = json.loads((model_dir / "config.json").read_text())
    archs = hp.get("architectures") or []
    if hp.get("model_type") != "bert" or "BertModel" not in archs:
        raise BuildError(f"numpy converter handles BertModel only, not {archs}")
    n_layer = int(hp["num_hidden_layers"])
    writer = gguf.GGUFWriter(path=None, arch=gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    _add_tensors(writer, gguf, model_dir, n_layer, outtype)
    _add_metadata(writer, gguf, model_dir)
    _add_hparams(writer, gguf, model_dir, hp, n_layer, outtype)
    _add_vocab(writer, gguf, model_dir, hp)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer.write_header_to_file(path=out)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()


def _add_tensors(writer: Any, gguf: Any, model_dir: Path, n_layer: int, outtype: str) -> None:
    """The tensors (same filtering, mapping and types as convert_hf_to_gguf.py)."""
    import numpy as np

    default_qtype = {"f16": gguf.GGMLQuantizationType.F16, "f32": gguf.GGMLQuantizationType.F32,
                     "q8_0": gguf.GGMLQuantizationType.Q8_0}[outtype]
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layer)
    f32_kinds = (gguf.MODEL_TENSOR.POS_EMBD, gguf.MODEL_TENSOR.TOKEN_TYPES)

    def is_kind(new_name: str, kind: Any, bid: int | None) -> bool:
        fmt = gguf.TENSOR_NAMES[kind]
        return new_name == (fmt.format(bid=bid) if "{bid}" in fmt else fmt) + ".weight"

    for hf_name, arr in read_safetensors(model_dir / "model.safetensors").items():
        name = _hf_name(hf_name)
        if name is None:
            continue
        new_name = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise BuildError(f"cannot map tensor {hf_name!r}")
        bid = next((int(p) for p in name.split(".") if p.isdecimal()), None)
        data = np.asarray(arr)
        if data.dtype not in (np.float16, np.float32):
            data = data.astype(np.float32)
        if (data.ndim <= 1 or new_name.endswith("_norm.weight")
                or any(is_kind(new_name, k, bid) for k in f32_kinds)
                or new_name[-7:] not in (".weight", ".lora_a", ".lora_b")):
            qtype = gguf.GGMLQuantizationType.F32
        else:
            qtype = default_qtype
        qdata = gguf.quants.quantize(data, qtype)
        writer.add_tensor(new_name, qdata, raw_dtype=qtype)


def _hf_name(hf_name: str) -> str | None:
    """A checkpoint tensor's name as the BERT tensor map knows it; None: not converted (the
    pooler, the pre-training heads, the position ids)."""
    name = hf_name[5:] if hf_name.startswith("bert.") else hf_name
    if name.endswith(".gamma"):
        name = name[:-6] + ".weight"
    if name.endswith(".beta"):
        name = name[:-5] + ".bias"
    if name in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"):
        return None
    if name.startswith(("cls.predictions", "cls.seq_relationship")):
        return None
    return name


def _add_metadata(writer: Any, gguf: Any, model_dir: Path) -> None:
    """General metadata (model card, size label)."""
    total, shared, expert, n_exp = writer.get_total_parameter_count()
    meta = gguf.Metadata.load(None, model_dir, None, total)
    if meta.name is None:
        meta.name = model_dir.name
    if meta.size_label is None and total > 0:
        meta.size_label = gguf.size_label(total, shared, expert, n_exp)
    writer.add_type(gguf.GGUFType.MODEL)
    meta.set_gguf_meta_model(writer)


def _add_hparams(writer: Any, gguf: Any, model_dir: Path, hp: dict[str, Any], n_layer: int,
                 outtype: str) -> None:
    ftype = {"f16": gguf.LlamaFileType.MOSTLY_F16, "f32": gguf.LlamaFileType.ALL_F32,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[outtype]
    writer.add_block_count(n_layer)
    writer.add_context_length(int(hp["max_position_embeddings"]))
    writer.add_embedding_length(int(hp["hidden_size"]))
    writer.add_feed_forward_length(int(hp["intermediate_size"]))
    writer.add_head_count(int(hp["num_attention_heads"]))
    writer.add_layer_norm_eps(float(hp["layer_norm_eps"]))
    writer.add_file_type(ftype)
    writer.add_causal_attention(False)
    pooling = _pooling_type(model_dir, gguf)
    if pooling is not None:
        writer.add_pooling_type(pooling)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


def _add_vocab(writer: Any, gguf: Any, model_dir: Path, hp: dict[str, Any]) -> None:
    """The WordPiece vocabulary ("phantom space" form that llama.cpp's WPM tokenizer expects)."""
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    model = tok.get("model") or {}
    if model.get("type") != "WordPiece":
        raise BuildError(f"expected a WordPiece tokenizer, got {model.get('type')}")
    vocab: dict[str, int] = model["vocab"]
    n_vocab = int(hp.get("vocab_size", len(vocab)))
    reverse = {i: t for t, i in vocab.items()}
    added = {a["content"]: a for a in tok.get("added_tokens", [])}
    tokens: list[str] = []
    toktypes: list[int] = []
    for i in range(n_vocab):
        t = reverse.get(i)
        if t is None:
            tokens.append(f"[PAD{i}]")
            toktypes.append(gguf.TokenType.UNUSED)
            continue
        if t in added:
            special = added[t].get("special") or (t.startswith("<|") and t.endswith("|>"))
            toktypes.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
        else:
            toktypes.append(gguf.TokenType.NORMAL)
        tokens.append(t)
    phantom = [t if tt == gguf.TokenType.CONTROL
               else (t[2:] if t.startswith("##") else "\u2581" + t)
               for t, tt in zip(tokens, toktypes, strict=True)]
    writer.add_token_type_count(int(hp.get("type_vocab_size", 1)))
    writer.add_tokenizer_model("bert")
    # The pre-tokenizer id llama.cpp's hash detection gives BERT-uncased WordPiece tokenizers;
    # llama.cpp ignores it for WPM vocabularies (they always use the default pre-tokenizer).
    writer.add_tokenizer_pre("jina-v2-en")
    writer.add_token_list(phantom)
    writer.add_token_types(toktypes)
    gguf.SpecialVocab(model_dir, n_vocab=len(phantom)).add_to_gguf(writer, quiet=True)


def _pooling_type(model_dir: Path, gguf: Any) -> Any:
    modules = model_dir / "modules.json"
    if not modules.is_file():
        return None
    for mod in json.loads(modules.read_text()):
        if mod["type"].endswith("Pooling"):
            cfg = json.loads((model_dir / mod["path"] / "config.json").read_text())
            if cfg.get("pooling_mode_mean_tokens"):
                return gguf.PoolingType.MEAN
            if cfg.get("pooling_mode_cls_token"):
                return gguf.PoolingType.CLS
            if cfg.get("pooling_mode_lasttoken"):
                return gguf.PoolingType.LAST
            raise BuildError("only MEAN, CLS and LAST pooling are supported")
    return None
