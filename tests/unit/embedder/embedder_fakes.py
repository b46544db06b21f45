"""Fakes shared by the embedder unit tests."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any


class FakeBackend:
    """Deterministic unit vectors from the text's hash; records every call."""

    def __init__(self, dim: int = 8, fingerprint: str = "fake:000000000000",
                 fail_on: str | None = None) -> None:
        self.dim = dim
        self.fingerprint = fingerprint
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
            out.append([x / n for x in v])
        return out

    def close(self) -> None:
        self.closed = True


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
        self.sent.append((subject, payload, headers, stream))
        return {"stream": stream, "seq": len(self.sent)}
