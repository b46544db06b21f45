"""Embedding backends: the llama.cpp one and the protocol fakes implement.

A backend is synchronous and not thread-safe by itself; `LlamaBackend` serialises its calls with
its own lock, so the service runs it in a worker thread (`asyncio.to_thread`) and every Llama
instance (ingest, query) has its own context and lock. The llama.cpp model itself lives in
`totalrecall_worker.llama_model`: the recall API embeds questions with the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from totalrecall_worker.llama_model import (
    MAX_TEXT_CHARS,
    LlamaBackend,
    ModelUnavailable,
    default_prefixes,
    model_fingerprint,
    query_input,
    tail_tokens,
)

__all__ = ["MAX_TEXT_CHARS", "EmbedBackend", "LlamaBackend", "ModelUnavailable",
           "default_prefixes", "model_fingerprint", "query_input", "tail_tokens"]


class EmbedBackend(Protocol):
    """`fingerprint` identifies the model (stored with every vector: vectors of different
    fingerprints are never compared); `dim` is read from the model."""

    fingerprint: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """L2-normalised vectors, one per text (blocking)."""
        ...

    def close(self) -> None: ...
