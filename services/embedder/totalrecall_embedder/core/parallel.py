"""Ingest on every core: several contexts of one model, each on one thread, a batch split
among them.

One llama.cpp context on N threads synchronises its threads at every operation of the graph;
on a CPU shared with other work one thread that loses its core stalls the others (two threads
of one context on 2 shared cores: 3-11 texts/s, against 20-37 for one thread alone). N
contexts of one thread each share nothing while they compute, as N llama.cpp processes would:
a core taken by a query or by Postgres slows one part of the batch, not all of it.

The part threads are started by the first `embed`, from the caller's thread: they inherit its
scheduling (the ingest thread's nice value and `SCHED_IDLE`, `priority.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .backend import EmbedBackend


def split_evenly(texts: Sequence[str], parts: int) -> list[Sequence[str]]:
    """`texts` in at most `parts` contiguous runs whose lengths differ by one at most."""
    parts = max(1, min(parts, len(texts)))
    size, extra = divmod(len(texts), parts)
    out: list[Sequence[str]] = []
    start = 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(texts[start:end])
        start = end
    return out


class ParallelBackend:
    """An `EmbedBackend` over `contexts` (the same model file, each with its own context and
    lock): the vectors are those of the first context alone, in the same order."""

    def __init__(self, contexts: Sequence[EmbedBackend]) -> None:
        if not contexts:
            raise ValueError("no contexts")
        self.contexts = list(contexts)
        first: Any = self.contexts[0]
        self.fingerprint: str = first.fingerprint
        self.dim: int = first.dim
        self.model_name = getattr(first, "model_name", "")
        self.device = getattr(first, "device", "cpu")
        #: threads of all the contexts together
        self.n_threads = sum(int(getattr(c, "n_threads", 1) or 1) for c in self.contexts)
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.contexts) - 1),
                                        thread_name_prefix="embed-ingest-part")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        parts = split_evenly(texts, len(self.contexts))
        if len(parts) <= 1:
            return self.contexts[0].embed(texts)
        # The caller's thread computes the first part itself, the pool the others.
        futures = [self._pool.submit(ctx.embed, part)
                   for ctx, part in zip(self.contexts[1:], parts[1:], strict=False)]
        out = list(self.contexts[0].embed(parts[0]))
        for f in futures:
            out += f.result()
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for c in self.contexts:
            c.close()
