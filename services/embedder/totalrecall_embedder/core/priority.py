"""CPU priority of the embedding threads.

Ingest (events, the document RPC, the backfill) is background work; a query embedding is on the
critical path of every prompt. Ingest runs on its own single-thread pool (queries on the query
responder's thread), and the ingest thread lowers its own scheduling priority (Linux:
`setpriority` on a thread id affects that thread only; llama.cpp's compute threads it spawns
inherit it), so that on a busy CPU the scheduler serves the query thread, the indexer and recall
first, and ingest takes what is left.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from totalrecall_worker.priority import lower_this_thread


def foreign_runnable(own: int = 0) -> int | None:
    """How many tasks are running or waiting for a CPU right now besides the caller and `own`
    more of this process's (Linux `/proc/loadavg`'s instantaneous count); None where unknown.

    A query spread over two threads is twice as fast on an idle machine, and several times slower
    beside one busy process at the same priority (ggml's threads wait for each other at every
    layer: one descheduled thread stalls the query for a time slice), so it is spread only while
    this reads 0."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - 1 - own)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: taskset, a cpuset), else all of them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def embedding_pool(name: str, nice: int = 0) -> ThreadPoolExecutor:
    """One worker thread (a backend serialises its calls anyway), at `nice` when positive."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name,
                              initializer=lower_this_thread, initargs=(nice,))
