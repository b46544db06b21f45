"""CPU priority of a worker's background threads, and of the database backends serving them.

Background work (ingest embeddings, HNSW builds) runs at a lowered scheduling priority, so that
on a busy CPU the scheduler serves what a recall waits for first and the background takes what
is left. On Linux a thread's nice value is its own (`setpriority` on a thread id), and the
threads it starts inherit it: a library's worker threads can be lowered by starting them from a
lowered thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TypeVar

import psutil

log = logging.getLogger("totalrecall.worker")

T = TypeVar("T")


def lower_this_thread(nice: int) -> int | None:
    """Raise the calling thread's nice value to at least `nice`; returns the value in effect
    (None where threads have no priority of their own)."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return None
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        if current < nice:  # never raise a priority (that needs privileges anyway)
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        return os.getpriority(os.PRIO_PROCESS, tid)
    except OSError as exc:
        log.warning("cannot lower a thread's priority to nice %d: %s", nice, exc)
        return None


def call_lowered(fn: Callable[[], T], nice: int, name: str = "lowered") -> T:
    """`fn()` on a short-lived thread of its own at `nice` (at least), so that the threads `fn`
    starts run at that priority for good; the caller's priority is untouched. Returns what `fn`
    returns, raises what it raises."""
    if nice <= 0:
        return fn()
    out: list[T] = []
    err: list[BaseException] = []

    def run() -> None:
        lower_this_thread(nice)
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the caller
            err.append(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join()
    if err:
        raise err[0]
    return out[0]


def lower_local_peer(pid: int, nice: int, name: str) -> bool:
    """Raise the nice value of process `pid` to at least `nice`, when it is the local server
    process serving one of this process's connections (a database backend: `name` its process
    name). A server in another container numbers its processes on its own, so the same number
    here may be anyone: the process must also be named `name` and hold the other end of one of
    this process's TCP connections. False when it is not, or may not be changed (another
    user's process)."""
    if nice <= 0:
        return False
    try:
        peer = psutil.Process(pid)
        if not peer.name().startswith(name):
            return False
        ours = {c.laddr for c in psutil.Process().net_connections("inet") if c.raddr}
        if not any(c.raddr and c.raddr in ours for c in peer.net_connections("inet")):
            return False
        if peer.nice() < nice:
            peer.nice(nice)
        return True
    except (psutil.Error, OSError) as exc:
        log.debug("cannot lower process %d to nice %d: %s", pid, nice, exc)
        return False
