"""Background threads at a lowered priority: `call_lowered` starts a library's threads from a
lowered thread, and leaves the caller as it was."""

from __future__ import annotations

import os
import sys
import threading

import pytest
from totalrecall_worker.priority import call_lowered, idle_this_thread, lower_this_thread

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_threads_started_inside_run_lowered_for_good_and_the_caller_is_untouched() -> None:
    base = nice_of_this_thread()
    seen: list[int] = []
    release = threading.Event()

    def pool_thread() -> None:  # a library's worker: started once, runs later
        release.wait(5)
        seen.append(nice_of_this_thread())

    def start() -> threading.Thread:
        t = threading.Thread(target=pool_thread, daemon=True)
        t.start()
        return t

    worker = call_lowered(start, base + 5)
    release.set()
    worker.join(5)
    assert seen == [base + 5]
    assert nice_of_this_thread() == base


def test_the_result_and_the_error_come_back_to_the_caller() -> None:
    assert call_lowered(lambda: 42, 3) == 42
    assert call_lowered(lambda: "same thread", 0) == "same thread"

    def fails() -> None:
        raise ValueError("from the lowered thread")

    with pytest.raises(ValueError, match="lowered thread"):
        call_lowered(fails, 3)


def test_a_priority_is_never_raised() -> None:
    base = nice_of_this_thread()
    assert call_lowered(lambda: lower_this_thread(base + 4), base + 6) == base + 6
    assert lower_this_thread(0) is None



@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE here")
def test_idle_puts_the_thread_and_what_it_starts_under_sched_idle_not_the_caller() -> None:
    before = os.sched_getscheduler(0)
    policies: list[int] = []

    def pool_thread() -> None:
        policies.append(os.sched_getscheduler(0))

    def start() -> threading.Thread:
        policies.append(os.sched_getscheduler(0))
        t = threading.Thread(target=pool_thread, daemon=True)
        t.start()
        return t

    call_lowered(start, 0, idle=True).join(5)
    assert policies == [os.SCHED_IDLE, os.SCHED_IDLE]
    assert os.sched_getscheduler(0) == before != os.SCHED_IDLE


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE here")
def test_idle_this_thread_says_whether_it_took() -> None:
    took: list[tuple[bool, int]] = []
    thread = threading.Thread(target=lambda: took.append(
        (idle_this_thread(), os.sched_getscheduler(0))))
    thread.start()
    thread.join(5)
    assert took == [(True, os.SCHED_IDLE)]
    assert os.sched_getscheduler(0) != os.SCHED_IDLE
