"""CPU priority of the embedding threads.

Ingest (events, the document RPC, the backfill) is background work; a query embedding is on the
critical path of every prompt. Ingest runs on its own single-thread pool (queries on the query
responder's thread), and the ingest thread lowers its own scheduling priority (Linux:
`setpriority` on a thread id affects that thread only; llama.cpp's compute threads it spawns
inherit it), so that on a busy CPU the scheduler serves the query thread, the indexer and recall
first, and ingest takes what is left. Under `SCHED_IDLE` (`ingest_idle`) it takes only what
nothing else wants: a query, or anything a recall waits on, preempts it the moment it wakes, so
ingest may then run on every core (`n_threads` 0) without a query ever waiting behind it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from totalrecall_worker.priority import (
    foreign_runnable,
    idle_this_thread,
    lower_this_thread,
    machine_idle,
    usable_cpus,
)

__all__ = ["embedding_pool", "foreign_runnable", "machine_idle", "usable_cpus"]


def _lower(nice: int, idle: bool) -> None:
    lower_this_thread(nice)
    if idle:
        idle_this_thread()


def embedding_pool(name: str, nice: int = 0, idle: bool = False) -> ThreadPoolExecutor:
    """One worker thread (a backend serialises its calls anyway), at `nice` when positive, and
    under `SCHED_IDLE` with `idle` (llama.cpp's compute threads it starts inherit both)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name,
                              initializer=_lower, initargs=(nice, idle))
