"""Fakes shared by the embedder unit tests."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any


class FakeBackend:
    """Deterministic unit vectors from the text's hash; records every call."""

    def __init__(self, dim: int = 8, fingerprint: str = "fake:000000000000",
                 fail_on: str | None = None, *, model_name: str = "",
                 device: str | None = None) -> None:
        self.dim = dim
        self.fingerprint = fingerprint
        self.model_name = model_name
        self.device = device
        self.calls: list[list[str]] = []
        self.fail_on = fail_on
        self.closed = False

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.fail_on is not None and any(self.fail_on in t for t in texts):
            raise RuntimeError("boom")
        out = []
        for t in texts:
            raw = hashlib.sha256(t.encode()).digest()[: self.dim]
            v = [b - 127.5 for b in raw]
            n = math.sqrt(sum(x * x for x in v))
            out.append([round(x / n, 7) for x in v])  # like the real backends
        return out

    def close(self) -> None:
        self.closed = True


class FakeFactory:
    """Stands in for LlamaBackend(path, **kw): records every load; `fail_gpu` / `fail` make
    loads raise ModelUnavailable; `missing` paths are "not found"."""

    def __init__(self, *, fail_gpu: bool = False, fail: bool = False, dim: int = 8,
                 gpu_embed_error: bool = False) -> None:
        self.fail_gpu, self.fail, self.dim = fail_gpu, fail, dim
        self.gpu_embed_error = gpu_embed_error
        self.loads: list[dict[str, Any]] = []
        self.made: list[FakeBackend] = []

    def __call__(self, path: Any, **kw: Any) -> FakeBackend:
        from totalrecall_embedder.core.backend import ModelUnavailable

        self.loads.append({"path": path, **kw})
        gpu = kw.get("n_gpu_layers", 0) != 0
        if self.fail or (gpu and self.fail_gpu):
            raise ModelUnavailable(f"cannot load {path}: {'CUDA out of memory' if gpu else 'x'}")
        b: FakeBackend = (_GpuFailing if gpu and self.gpu_embed_error else FakeBackend)(
            dim=self.dim, fingerprint=kw.get("fingerprint") or f"{path.stem}:abc",
            model_name=path.name, device="gpu" if gpu else "cpu")
        self.made.append(b)
        return b


class _GpuFailing(FakeBackend):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


class FakeMsg:
    def __init__(self, subject: str, data: bytes) -> None:
        self.subject = subject
        self.data = data
        self.acked = False
        self.naked: float | bool | None = False

    async def ack(self) -> None:
        self.acked = True

    async def nak(self, delay: float | None = None) -> None:
        self.naked = delay if delay is not None else True


class FakePublisher:
    def __init__(self, fail_subjects: Sequence[str] = ()) -> None:
        self.sent: list[tuple[str, bytes, dict[str, str], str]] = []
        self.fail_subjects = set(fail_subjects)

    async def __call__(self, subject: str, payload: bytes, headers: dict[str, str],
                       stream: str) -> Any:
        if subject in self.fail_subjects:
            raise TimeoutError("no PubAck")
        msg_id = headers.get("Nats-Msg-Id")
        duplicate = msg_id is not None and any(h.get("Nats-Msg-Id") == msg_id
                                               for _, _, h, _ in self.sent)
        self.sent.append((subject, payload, headers, stream))
        return PubAck(stream=stream, seq=len(self.sent), duplicate=duplicate)


class PubAck:
    def __init__(self, stream: str, seq: int, duplicate: bool) -> None:
        self.stream, self.seq, self.duplicate = stream, seq, duplicate
