"""Process watcher change detection with a fake process table and a fake clock."""

from __future__ import annotations

import time
from dataclasses import replace

from totalrecall_schema import Severity
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.process import ProcessThresholds, ProcessWatcher, ProcSample

GiB = 1024**3


class FakeProcs:
    def __init__(self) -> None:
        self.procs: dict[int, ProcSample] = {}

    def set(self, pid: int, *, cpu_time: float = 0.0, rss: int = 50 * 1024**2,
            mem_percent: float = 1.0, name: str = "python3",
            cmdline: list[str] | None = None, zombie: bool = False) -> None:
        self.procs[pid] = ProcSample(pid=pid, create_time=1_700_000_000.0 + pid, name=name,
                                     cmdline=cmdline or [name, "-c", "work()"], username="alice",
                                     cpu_time=cpu_time, rss=rss, mem_percent=mem_percent,
                                     zombie=zombie)

    def burn(self, pid: int, seconds: float) -> None:
        p = self.procs[pid]
        self.procs[pid] = replace(p, cpu_time=p.cpu_time + seconds)

    def sample(self) -> list[ProcSample]:
        return list(self.procs.values())


def make(interval: float = 30.0, **thr: float) -> tuple[ProcessWatcher, FakeProcs, FakeClock]:
    clock = FakeClock()
    procs = FakeProcs()
    w = ProcessWatcher(EventContext(hostname="box", clock=clock), interval_s=interval,
                       thresholds=ProcessThresholds(**thr), source=procs)  # type: ignore[arg-type]
    return w, procs, clock


def step(w: ProcessWatcher, procs: FakeProcs, clock: FakeClock, dt: float,
         burns: dict[int, float]) -> list:
    for pid, frac in burns.items():
        procs.burn(pid, frac * dt)
    clock.advance(dt)
    return w.poll()


def test_first_poll_is_a_baseline_and_quiet_processes_emit_nothing() -> None:
    w, procs, clock = make()
    procs.set(10)
    procs.set(11)
    assert w.poll() == []
    assert step(w, procs, clock, 30, {10: 0.05, 11: 0.1}) == []


def test_newly_hot_process_emits_high_cpu_once_then_rearms() -> None:
    w, procs, clock = make(cpu_percent=50)
    procs.set(1234, cmdline=["python3", "train.py", "--api-key",
                             "sk-abcdefghijklmnopqrstuvwxyz123"])
    w.poll()
    events = step(w, procs, clock, 30, {1234: 0.98})
    assert len(events) == 1
    e = events[0]
    assert (e.category, e.subcategory) == ("system.process", "high_cpu")
    assert e.summary == "python3 (PID 1234) using 98% CPU"
    assert e.severity == Severity.WARNING
    assert "train.py" in e.detail and "alice" in e.detail and "RSS" in e.detail
    assert "sk-abcdefghijklmnopqrstuvwxyz123" not in e.model_dump_json()
    assert e.metadata.model_extra["pid"] == 1234
    assert e.source == "watcher.process"
    # still hot: suppressed
    assert step(w, procs, clock, 30, {1234: 0.99}) == []
    # slightly under the threshold but above the re-arm level: still suppressed
    assert step(w, procs, clock, 30, {1234: 0.45}) == []
    assert step(w, procs, clock, 30, {1234: 0.95}) == []
    # drops clearly below, then crosses again: a new alert
    assert step(w, procs, clock, 30, {1234: 0.05}) == []
    again = step(w, procs, clock, 30, {1234: 0.9})
    assert [x.subcategory for x in again] == ["high_cpu"]


def test_cpu_is_averaged_over_the_interval() -> None:
    w, procs, clock = make(cpu_percent=50)
    procs.set(5)
    w.poll()
    # 10 s of CPU in a 30 s interval = 33 %: a short spike is not "sustained"
    procs.burn(5, 10)
    clock.advance(30)
    assert w.poll() == []


def test_new_process_needs_two_samples() -> None:
    w, procs, clock = make(cpu_percent=50)
    w.poll()
    procs.set(77, cpu_time=500.0)  # appeared with lots of CPU time already: unknown rate
    clock.advance(1)
    assert w.poll() == []
    assert [e.subcategory for e in step(w, procs, clock, 1, {77: 1.0})] == ["high_cpu"]


def test_multi_core_process_reads_over_100_percent() -> None:
    w, procs, clock = make(cpu_percent=50)
    procs.set(9)
    w.poll()
    (e,) = step(w, procs, clock, 10, {9: 2.0})
    assert "200% CPU" in e.summary


def test_high_memory_by_rss_and_by_percent() -> None:
    w, procs, clock = make(rss_mb=1024, mem_percent=30)
    procs.set(1, rss=100 * 1024**2)
    procs.set(2, rss=100 * 1024**2, mem_percent=5)
    w.poll()
    procs.set(1, rss=2 * GiB, mem_percent=10)
    procs.set(2, rss=500 * 1024**2, mem_percent=40)
    clock.advance(30)
    events = w.poll()
    assert sorted((e.subcategory, e.metadata.model_extra["pid"]) for e in events) == [
        ("high_mem", 1), ("high_mem", 2)]
    e1 = next(e for e in events if e.metadata.model_extra["pid"] == 1)
    assert "2.0 GiB" in e1.summary
    clock.advance(30)
    assert w.poll() == []  # still high: no repeat


def test_tracked_process_that_disappears_reports_exit() -> None:
    w, procs, clock = make(cpu_percent=50)
    procs.set(4321, name="node")
    procs.set(99)  # never hot: its exit is not news
    w.poll()
    step(w, procs, clock, 30, {4321: 0.97})
    del procs.procs[4321]
    del procs.procs[99]
    clock.advance(30)
    events = w.poll()
    assert len(events) == 1
    e = events[0]
    assert (e.category, e.subcategory) == ("system.process", "exit")
    assert "node (PID 4321) exited" in e.summary and "97% CPU" in e.summary
    assert "exit code: unknown" in e.detail
    assert w.tracked == {}


def test_zombie_counts_as_exited() -> None:
    w, procs, clock = make(cpu_percent=50)
    procs.set(3)
    w.poll()
    step(w, procs, clock, 5, {3: 1.0})
    procs.set(3, zombie=True)
    clock.advance(5)
    assert [e.subcategory for e in w.poll()] == ["exit"]


def test_pid_reuse_is_a_different_process() -> None:
    w, procs, clock = make(cpu_percent=50)
    procs.set(50)
    w.poll()
    step(w, procs, clock, 5, {50: 1.0})
    # same PID, different create_time: the old one exited, the new one starts from scratch
    old = procs.procs[50]
    procs.procs[50] = replace(old, create_time=old.create_time + 100, cpu_time=0.0)
    clock.advance(5)
    assert [e.subcategory for e in w.poll()] == ["exit"]


# --- how a tracked process ended ----------------------------------------------------------------
class FakeExits:
    def __init__(self) -> None:
        self.statuses: dict[int, int] = {}
        self.closed = False

    def start(self) -> bool:
        return True

    def lookup(self, pid: int, *, not_before: float = 0.0, wait_s: float = 0.2) -> int | None:
        return self.statuses.get(pid)

    def close(self) -> None:
        self.closed = True


def test_killed_by_a_signal_is_a_crash_with_the_signal() -> None:
    exits = FakeExits()
    clock = FakeClock()
    procs = FakeProcs()
    w = ProcessWatcher(EventContext(hostname="box", clock=clock), interval_s=5,
                       source=procs, exits=exits)  # type: ignore[arg-type]
    procs.set(77, name="ffmpeg")
    w.poll()
    step(w, procs, clock, 5, {77: 1.0})
    del procs.procs[77]
    exits.statuses[77] = 9  # SIGKILL
    clock.advance(5)
    (e,) = w.poll()
    assert (e.category, e.subcategory, e.severity) == ("system.process", "crash", Severity.ERROR)
    assert e.summary.startswith("ffmpeg (PID 77) killed by SIGKILL after high CPU use")
    extra = e.metadata.model_extra
    assert extra["signal"] == 9 and extra["signal_name"] == "SIGKILL"
    assert extra["core_dumped"] is False and e.metadata.exit_code is None
    assert "wait status 9" in e.detail and "SIGKILL" in e.metadata.tags
    assert w.stats()["exit_statuses_known"] == 1
    w.close()
    assert exits.closed


def test_zombie_exit_code_tells_clean_exit_from_failure() -> None:
    w, procs, clock = make(interval=5, cpu_percent=50)
    for pid in (5, 6):
        procs.set(pid)
    w.poll()
    step(w, procs, clock, 5, {5: 1.0, 6: 1.0})
    procs.procs[5] = replace(procs.procs[5], zombie=True, exit_status=0)
    procs.procs[6] = replace(procs.procs[6], zombie=True, exit_status=3 << 8)
    clock.advance(5)
    by_pid = {e.metadata.model_extra["pid"]: e for e in w.poll()}
    assert by_pid[5].subcategory == "exit" and by_pid[5].metadata.exit_code == 0
    assert "exited with code 0" in by_pid[5].summary
    assert by_pid[6].subcategory == "crash" and by_pid[6].metadata.exit_code == 3
    assert "signal" not in by_pid[6].metadata.model_extra


def test_wait_status_decoding_and_connector_messages() -> None:
    import struct

    from totalrecall_watchers.adapters.proc_connector import (
        CN_MSG,
        EXIT_EVENT,
        NLMSG_HDR,
        PROC_EVENT_EXIT,
        PROC_EVENT_HDR,
        ProcConnectorExits,
    )
    from totalrecall_watchers.core.procexit import ExitStatus

    assert ExitStatus(11 | 0x80).describe() == "killed by SIGSEGV (core dumped)"
    assert ExitStatus(2 << 8).describe() == "exited with code 2"
    c = ProcConnectorExits()

    def msg(pid: int, tgid: int, status: int) -> bytes:
        body = PROC_EVENT_HDR.pack(PROC_EVENT_EXIT, 0, 0) + EXIT_EVENT.pack(pid, tgid, status, 17)
        cn = CN_MSG.pack(1, 1, 0, 0, len(body), 0) + body
        return NLMSG_HDR.pack(NLMSG_HDR.size + len(cn), 3, 0, 0, 0) + cn

    c._parse(msg(100, 100, 15) + msg(101, 100, 0) + struct.pack("=I", 0))  # a thread is ignored
    assert c.lookup(100) == 15 and c.lookup(101) is None
    assert c.lookup(100, not_before=time.time() + 60) is None  # a reused PID does not match


def test_connector_survives_lost_events() -> None:
    import errno

    from totalrecall_watchers.adapters.proc_connector import ProcConnectorExits

    c = ProcConnectorExits()

    class Sock:
        calls = 0

        def recv(self, n: int) -> bytes:
            Sock.calls += 1
            if Sock.calls == 1:
                raise OSError(errno.ENOBUFS, "No buffer space available")
            c._stop.set()
            raise TimeoutError

    c._sock = Sock()  # type: ignore[assignment]
    c._loop()
    assert c.overruns == 1 and c.error is None and Sock.calls == 2
