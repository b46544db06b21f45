"""CPU priority of a worker's background threads, and of the database backends serving them.

Background work (ingest embeddings, HNSW builds) runs at a lowered scheduling priority, so that
on a busy CPU the scheduler serves what a recall waits for first and the background takes what
is left. On Linux a thread's nice value is its own (`setpriority` on a thread id), and the
threads it starts inherit it: a library's worker threads can be lowered by starting them from a
lowered thread.

A nice value sets a thread's share of a CPU it shares, not how soon a task that wakes gets a
CPU: the scheduler places a waking task on an idle CPU if it finds one, and a CPU running a
nice-10 thread is not idle, so the task queues beside it or on the other CPU (and waits out the
running thread's slice: EEVDF lets it run to parity). A thread computing for seconds at nice 10
delays every short task of a request (a database query, an event loop's callback) that wakes
meanwhile. Under `SCHED_IDLE` (`idle=True`) its CPU counts as idle when a task wakes, and the
woken task preempts it at once: it runs on CPU time nothing else wants. An unprivileged thread
cannot leave `SCHED_IDLE` again; on a CPU kept busy by other work, its job waits until the CPU
has time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psutil

log = logging.getLogger("totalrecall.worker")

T = TypeVar("T")


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


#: Looks at the machine's run queue before a query is spread over more threads, and the gap
#: between them (`machine_idle`).
IDLE_LOOKS = 4
IDLE_LOOK_GAP_S = 0.00015


def machine_idle(own: int = 0, runnable: Callable[[int], int | None] = foreign_runnable,
                 looks: int = IDLE_LOOKS, gap_s: float = IDLE_LOOK_GAP_S) -> bool:
    """Nothing else is running: one of a few looks over ~0.4 ms finds no other task. A busy
    process is always there; what delivered a request (nats-server, the caller's loop) is
    gone within a tenth of a millisecond, and one look on arrival sees it a quarter of the
    time (16 of 60 long prompts in the recall bench)."""
    for i in range(looks):
        if i:
            time.sleep(gap_s)
        if runnable(own) == 0:
            return True
    return False


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


_idle_refused = threading.Event()


def idle_this_thread() -> bool:
    """Put the calling thread under `SCHED_IDLE` (see the module's docstring); False where
    there is no such policy or it may not be set."""
    if not hasattr(os, "SCHED_IDLE"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # 0: the calling thread
    except OSError as exc:
        if not _idle_refused.is_set():  # once: it is asked at every build, and will not change
            _idle_refused.set()
            log.warning("cannot put a thread under SCHED_IDLE: %s", exc)
        return False
    return True


def call_lowered(fn: Callable[[], T], nice: int, name: str = "lowered",
                 idle: bool = False) -> T:
    """`fn()` on a short-lived thread of its own at `nice` (at least), and under `SCHED_IDLE`
    with `idle`, so that the threads `fn` starts run that way for good; the caller's priority
    is untouched. Returns what `fn` returns, raises what it raises."""
    if nice <= 0 and not idle:
        return fn()
    out: list[T] = []
    err: list[BaseException] = []

    def run() -> None:
        lower_this_thread(nice)
        if idle:
            idle_this_thread()
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
