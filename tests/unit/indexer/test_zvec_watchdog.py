"""The zvec watchdog: a call in flight past its limit is reported (the process would end); calls
that finish, or a limit of 0, never are (a fake clock, no threads)."""

from __future__ import annotations

from totalrecall_indexer.adapters.zvec_watchdog import ZvecWatchdog


def test_a_call_stuck_past_the_limit_ends_the_process() -> None:
    now = [0.0]
    fired: list[tuple[str, float]] = []
    dog = ZvecWatchdog(60.0, on_stall=lambda kind, age: fired.append((kind, age)),
                       clock=lambda: now[0])
    with dog.call("upsert"):
        now[0] = 30.0
        assert not dog.check()  # slow, not stuck
    with dog.call("query"):
        now[0] = 100.0
        assert dog.check()
    assert fired == [("query", 70.0)]
    now[0] = 1000.0
    assert not dog.check()  # nothing in flight


def test_a_limit_of_zero_never_starts() -> None:
    dog = ZvecWatchdog(0.0, on_stall=lambda kind, age: None)
    dog.start()
    assert dog._thread is None
