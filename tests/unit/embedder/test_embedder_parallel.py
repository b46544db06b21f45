"""Ingest on every core (`core/parallel.py`): a batch split among several one-thread contexts
of one model, the vectors those of one context, in order."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from embedder_fakes import FakeBackend
from totalrecall_embedder.core.engine import Engine, EngineConfig
from totalrecall_embedder.core.parallel import ParallelBackend, split_evenly


class ThreadBackend(FakeBackend):
    """A FakeBackend that notes the thread each call ran on, and can hold its callers until
    `parties` of them compute at once (proof that the parts run side by side)."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        super().__init__()
        self.threads: list[str] = []
        self.barrier = barrier

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.threads.append(threading.current_thread().name)
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        return super().embed(texts)


def test_split_evenly_keeps_order_and_sizes_within_one() -> None:
    texts = [str(i) for i in range(7)]
    parts = split_evenly(texts, 3)
    assert [list(p) for p in parts] == [["0", "1", "2"], ["3", "4"], ["5", "6"]]
    assert [list(p) for p in split_evenly(texts[:2], 3)] == [["0"], ["1"]]
    assert [list(p) for p in split_evenly([], 3)] == [[]]


def test_the_parts_compute_at_once_and_the_vectors_are_one_contexts_in_order() -> None:
    barrier = threading.Barrier(3)
    ctxs = [ThreadBackend(barrier) for _ in range(3)]
    par = ParallelBackend(ctxs)
    texts = [f"event {i}" for i in range(10)]
    # The barrier lets no part finish until all three compute together.
    assert par.embed(texts) == FakeBackend().embed(texts)
    assert [len(c.calls[0]) for c in ctxs] == [4, 3, 3]
    assert len({c.threads[0] for c in ctxs}) == 3  # three threads, the caller's among them
    assert ctxs[0].threads[0] == threading.current_thread().name
    assert par.n_threads == 3 and par.fingerprint == ctxs[0].fingerprint and par.dim == 8
    par.close()
    assert all(c.closed for c in ctxs)


def test_one_text_goes_to_the_first_context_alone() -> None:
    ctxs = [ThreadBackend() for _ in range(2)]
    par = ParallelBackend(ctxs)
    assert par.embed(["only"]) == FakeBackend().embed(["only"])
    assert ctxs[0].calls == [["only"]] and ctxs[1].calls == []
    par.close()


def _engine(tmp_path: Path, gpu: bool, **cfg: object) -> tuple[Engine, list[dict[str, object]]]:
    loads: list[dict[str, object]] = []

    def factory(path: Path, **kw: object) -> FakeBackend:
        loads.append(kw)
        return FakeBackend()

    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    eng = Engine(EngineConfig(model_path=model, **cfg),  # type: ignore[arg-type]
                 local_factory=factory, gpu_probe=lambda: gpu)
    return eng, loads


async def test_the_engine_ingests_on_as_many_contexts_as_asked(tmp_path: Path) -> None:
    eng, loads = _engine(tmp_path, False, ingest_workers=3)
    assert await eng.load()
    assert isinstance(eng.ingest, ParallelBackend) and len(eng.ingest.contexts) == 3
    assert eng.query is not None and not isinstance(eng.query, ParallelBackend)
    assert len(loads) == 4 and all(kw["n_threads"] == 1 for kw in loads)
    texts = [f"t{i}" for i in range(6)]
    vecs = await eng.embed_ingest(texts)
    assert vecs == FakeBackend().embed([eng.prefix("document") + t for t in texts])
    assert all(len(c.calls) == 1 for c in eng.ingest.contexts)  # type: ignore[attr-defined]
    eng.close()


async def test_one_context_on_the_gpu_and_with_every_core_threaded(tmp_path: Path) -> None:
    gpu, _ = _engine(tmp_path, True, ingest_workers=3)
    assert await gpu.load()
    assert gpu.device == "gpu" and not isinstance(gpu.ingest, ParallelBackend)
    (tmp_path / "b").mkdir()
    threaded, _ = _engine(tmp_path / "b", False, n_threads=0, ingest_workers=3)
    assert await threaded.load()
    assert not isinstance(threaded.ingest, ParallelBackend)
    gpu.close()
    threaded.close()
