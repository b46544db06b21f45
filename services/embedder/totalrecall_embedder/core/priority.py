"""CPU priority of the embedding threads.

Ingest (events, the document RPC, the backfill) is background work; a query embedding is on the
critical path of every prompt. Ingest runs on its own single-thread pool (queries on the query
responder's thread), and the ingest thread lowers its own scheduling priority (Linux:
`setpriority` on a thread id affects that thread only; llama.cpp's compute threads it spawns
inherit it), so that on a busy CPU the scheduler serves the query thread, the indexer and recall
first, and ingest takes what is left.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from totalrecall_worker.priority import foreign_runnable, lower_this_thread, machine_idle, usable_cpus

__all__ = ["embedding_pool", "foreign_runnable", "machine_idle", "usable_cpus"]


def embedding_pool(name: str, nice: int = 0) -> ThreadPoolExecutor:
    """One worker thread (a backend serialises its calls anyway), at `nice` when positive."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name,
                              initializer=lower_this_thread, initargs=(nice,))
