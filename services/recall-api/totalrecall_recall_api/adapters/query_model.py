"""A question's embedding made in this process, from the embedder's own model file.

A recall waits on its question's embedding. Asked of the embedder, it costs a trip through NATS
and the wake-ups of two more processes, each of which may wait for a CPU on a busy machine:
the `embed` stage measured 2-3x llama.cpp alone embedding the same question
(docs/perf/2026-11-29-recall-floor.md). Here the same GGUF is loaded with the same code as the
embedder's query RPC (`totalrecall_worker.llama_model`: prefix, cut to the query's last tokens,
normalisation, rounding, fingerprint), on a thread of its own at the process's priority, while
ingest embeds in the embedder at a lowered one: a question never waits behind ingest.

Its vectors must be the embedder's, or the index would compare vectors of two spaces. A test
compares the two bit for bit; at run time, one probe text is embedded both ways before the
first local use, and a differing answer (another model file or prefix, a token limit set in one
place only) keeps every question on the embedder (compared again a minute later: the embedder
may have loaded the model since). So does a missing model file or `llama_cpp`
(a container that ships neither): the embedder RPC is the fallback, always.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..ports import Embedder

log = logging.getLogger("totalrecall.recall")

#: The text embedded both ways before the local model is trusted.
PROBE = "why did the nginx service fail to start after the update?"
#: Largest difference per dimension still taken as the same vector: the embedder's query
#: context may run on other thread counts (a sum in another order), while another model or
#: prefix differs by orders of magnitude more.
TOLERANCE = 1e-5
#: How long after a failed probe (the embedder not up yet) the next recall probes again.
RETRY_S = 5.0
#: How long after a disagreement (the embedder on another model, its fallback endpoint) the
#: next recall compares again: the embedder may have loaded the same model since.
RECHECK_S = 60.0


class LocalQueryEmbedder:
    """`Embedder` over a local llama.cpp model, `remote` (the embedder RPC) until the two agree
    and whenever they do not.

    `spares`: more contexts of the same model. Questions asked at once are embedded at once, one
    per context (one thread each: a context is not shared between threads), so a burst of
    questions is not queued behind one thread on a machine with cores to spare."""

    def __init__(self, backend: Any, remote: Embedder, *, prefix: str, max_tokens: int,
                 parallel_threads: int = 1, spares: Sequence[Any] = ()) -> None:
        self.backend, self.remote = backend, remote
        self.backends = [backend, *spares]
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for b in self.backends:
            self._free.put(b)
        self.prefix, self.max_tokens = prefix, max_tokens
        self.parallel_threads = parallel_threads
        #: None: not compared yet (or compared and the embedder did not answer)
        self.agreed: bool | None = None
        self._probe: asyncio.Task[None] | None = None
        self._probed_at = float("-inf")
        self._pool = ThreadPoolExecutor(max_workers=len(self.backends),
                                        thread_name_prefix="recall-query-embed")
        #: told whether a long prompt was spread (True) or kept on one thread (False)
        self.on_spread: Callable[[bool], None] | None = None

    @property
    def model(self) -> str:
        return str(self.backend.fingerprint)

    def _embed(self, text: str, exclusive: bool) -> list[float]:
        b = self._free.get()  # as many pool threads as contexts: one is free for this one
        try:
            return self._embed_on(b, text, exclusive)
        finally:
            self._free.put(b)

    def _embed_on(self, b: Any, text: str, exclusive: bool) -> list[float]:
        from totalrecall_worker.llama_model import query_input
        from totalrecall_worker.priority import machine_idle

        final = query_input(text, self.prefix, self.max_tokens, b.count_tokens)
        own = int(b.n_threads)
        # A long prompt is spread while nothing else runs (ggml's threads stall each other
        # beside a busy process): the embedder's rule (`Engine._threads_for`).
        spread = False
        if exclusive and self.parallel_threads > own:
            spread = machine_idle()
            if self.on_spread is not None:
                self.on_spread(spread)
        vecs: list[list[float]] = b.embed_on([final], self.parallel_threads if spread else own)
        return vecs[0]

    async def _local(self, text: str, exclusive: bool) -> list[float]:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self._embed, text, exclusive)

    async def embed_query(self, text: str, *, exclusive: bool = False
                          ) -> tuple[list[float], str | None]:
        if self.agreed:
            return await self._local(text, exclusive), self.model
        wait = RETRY_S if self.agreed is None else RECHECK_S
        if self._probe is None and time.monotonic() - self._probed_at >= wait:
            self._probe = asyncio.create_task(self.compare())
        return await self.remote.embed_query(text, exclusive=exclusive)

    async def compare(self) -> None:
        """Embed `PROBE` both ways; agree when the model and every dimension match."""
        self._probed_at = time.monotonic()
        try:
            theirs, model = await self.remote.embed_query(PROBE)
            ours = await self._local(PROBE, False)
        except Exception as exc:  # the embedder not up yet: asked again after RETRY_S
            log.info("query model not compared with the embedder yet: %s",
                     str(exc) or type(exc).__name__)
            return
        finally:
            self._probe = None
        same = model == self.model and len(ours) == len(theirs) and max(
            (abs(a - b) for a, b in zip(ours, theirs, strict=True)), default=0.0) <= TOLERANCE
        self.agreed = same
        if same:
            log.info("question embeddings made in this process (%s)", self.model)
        else:
            log.warning("the query model here (%s) does not embed as the embedder does (%s): "
                        "questions go to the embedder", self.model, model)

    def model_refused(self, model: str | None) -> None:
        """The index refused vectors of `model` (the embedder changed models): compared again
        before the next local use."""
        if model == self.model:
            self.agreed = None

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        for b in self.backends:
            b.close()


def load_query_embedder(path: Path, remote: Embedder, *, prefix: str | None, max_tokens: int,
                        threads: int, parallel_threads: int, contexts: int = 1
                        ) -> LocalQueryEmbedder | None:
    """The local query model over `remote`, or None (no file, no llama_cpp, a load error):
    blocking, run it in a thread. `contexts` of the model (0: one per usable core)."""
    if not path.is_file():
        log.info("no query model at %s: questions go to the embedder", path)
        return None
    loaded: list[Any] = []
    try:
        from totalrecall_worker.llama_model import LlamaBackend, default_prefixes
        from totalrecall_worker.priority import usable_cpus

        loaded.append(LlamaBackend(path, n_threads=threads))
        for _ in range((contexts or usable_cpus()) - 1):
            loaded.append(LlamaBackend(path, n_threads=threads,
                                       fingerprint=loaded[0].fingerprint))
    except Exception as exc:  # ImportError, ModelUnavailable
        for b in loaded:  # a context that did load is not left open
            b.close()
        log.warning("cannot load the query model %s (%s): questions go to the embedder",
                    path, exc)
        return None
    backend, *spares = loaded
    return LocalQueryEmbedder(backend, remote,
                              prefix=default_prefixes(path.name)[0] if prefix is None else prefix,
                              max_tokens=max_tokens, parallel_threads=parallel_threads,
                              spares=spares)
