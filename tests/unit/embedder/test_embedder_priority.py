"""Ingest embeds on its own lowered-priority thread; queries where they are asked, at normal
priority."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from embedder_fakes import FakeBackend
from totalrecall_embedder.core.engine import Engine, EngineConfig
from totalrecall_worker.priority import lower_this_thread

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


class WhereBackend(FakeBackend):
    """Records the thread and its nice value of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.append((threading.current_thread().name, nice_of_this_thread()))
        return super().embed(texts)


async def test_ingest_runs_niced_and_queries_do_not() -> None:
    base = nice_of_this_thread()
    ingest, query = WhereBackend(), WhereBackend()
    engine = Engine(EngineConfig(model_path=Path("unused"), ingest_nice=base + 7),
                    backend=ingest, query_backend=query)
    await engine.embed_ingest(["an event"])
    await engine.embed_documents(["a document"])
    engine.embed_query(["a question"])  # in production, on the query responder's thread
    assert [n for _, n in ingest.seen] == [base + 7, base + 7]
    assert all(name.startswith("embed-ingest") for name, _ in ingest.seen)
    assert query.seen == [(query.seen[0][0], base)]
    assert query.seen[0][0] == threading.current_thread().name  # never the ingest thread
    assert nice_of_this_thread() == base  # the caller's thread is untouched
    engine.close()
    # after close (a reload) the pools work again
    engine.ingest, engine.query = ingest, query
    await engine.embed_ingest(["another event"])
    assert ingest.seen[-1][1] == base + 7


def test_lowering_affects_only_the_calling_thread() -> None:
    base = nice_of_this_thread()
    assert lower_this_thread(0) is None  # 0: off
    done: list[int | None] = []
    t = threading.Thread(target=lambda: done.append(lower_this_thread(base + 3)))
    t.start()
    t.join()
    assert done == [base + 3]
    assert nice_of_this_thread() == base


class PolicyBackend(FakeBackend):
    """Records the scheduling policy of the thread of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.policies: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.policies.append(os.sched_getscheduler(0))
        return super().embed(texts)


async def test_ingest_idle_runs_under_sched_idle_and_queries_do_not() -> None:
    ingest, query = PolicyBackend(), PolicyBackend()
    engine = Engine(EngineConfig(model_path=Path("unused"), ingest_idle=True),
                    backend=ingest, query_backend=query)
    await engine.embed_ingest(["an event"])
    engine.embed_query(["a question"])
    assert ingest.policies == [os.SCHED_IDLE]
    assert query.policies == [os.sched_getscheduler(0)] != [os.SCHED_IDLE]
    engine.close()


async def test_no_thread_count_means_every_usable_core() -> None:
    from totalrecall_worker.priority import usable_cpus

    threads: list[int] = []

    def factory(path: Path, *, n_threads: int, **_: object) -> FakeBackend:
        threads.append(n_threads)
        return FakeBackend()

    engine = Engine(EngineConfig(model_path=Path("unused"), n_threads=0, query_n_threads=1,
                                 device="cpu"), local_factory=factory, gpu_probe=lambda: False)
    assert await engine.load()
    assert threads == [usable_cpus(), 1]  # the ingest context, then the query one
    engine.close()
