"""Pressure watcher: thresholds with hysteresis over a fake /proc tree (PSI, vmstat), fake
memory/load/processes and a fake clock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from totalrecall_schema import REDACTED, MemoryEvent, Severity
from totalrecall_watchers.adapters.pressure import (
    SystemPressure,
    read_psi,
    read_psi_file,
    read_vmstat_swap,
)
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.pressure import PressureWatcher
from totalrecall_watchers.core.pressure_readings import MemoryStats, Psi, TopProcess, TopSnapshot
from totalrecall_watchers.settings import PressureSettings, Settings

GiB = 1024**3
MiB = 1024**2


def write_psi(root: Path, resource: str, some: float, full: float | None = 0.0) -> None:
    d = root / "pressure"
    d.mkdir(parents=True, exist_ok=True)
    text = f"some avg10={some:.2f} avg60=0.00 avg300=0.00 total=123\n"
    if full is not None:
        text += f"full avg10={full:.2f} avg60=0.00 avg300=0.00 total=45\n"
    (d / resource).write_text(text)


def write_vmstat(root: Path, pswpin: int, pswpout: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "vmstat").write_text(f"nr_free_pages 1000\npgpgin 5\npswpin {pswpin}\n"
                                 f"pswpout {pswpout}\npgfault 99\n")


def proc_tree(root: Path, *, psi: bool = True) -> Path:
    write_vmstat(root, 0, 0)
    if psi:
        for res in ("cpu", "memory", "io"):
            write_psi(root, res, 0.0, None if res == "cpu" else 0.0)
    return root


class FakeSource(SystemPressure):
    """PSI and vmstat from the fake tree (the real readers); memory, load, processes set here."""

    def __init__(self, proc_root: Path) -> None:
        super().__init__(str(proc_root), sample_s=0.0)
        self.mem: MemoryStats | None = MemoryStats(total=16 * GiB, available=12 * GiB,
                                                   percent=25.0)
        self.mem_error: Exception | None = None
        self.loadavg: tuple[float, float, float] | None = (0.5, 0.4, 0.3)
        self.cores = 4
        self.procs: list[TopProcess] = [
            TopProcess(101, "cc1plus", ["cc1plus", "-O2", "big.cpp"], 180.0, 900 * MiB),
            TopProcess(202, "firefox", ["/usr/lib/firefox/firefox", "-P", "work"], 12.0,
                       3 * GiB),
            TopProcess(303, "idle", ["sleep", "1000"], 0.0, 1 * MiB),
        ]
        self.snapshots = 0
        self.snapshot_error: Exception | None = None

    def memory(self) -> MemoryStats | None:
        if self.mem_error is not None:
            raise self.mem_error
        return self.mem

    def load(self) -> tuple[float, float, float] | None:
        return self.loadavg

    def cpu_count(self) -> int:
        return self.cores

    def top_processes(self, n: int) -> TopSnapshot:
        self.snapshots += 1
        if self.snapshot_error is not None:
            raise self.snapshot_error
        by_cpu = sorted((p for p in self.procs if p.cpu_percent > 0),
                        key=lambda p: p.cpu_percent, reverse=True)[:n]
        by_rss = sorted(self.procs, key=lambda p: p.rss, reverse=True)[:n]
        return TopSnapshot(by_cpu, by_rss, 0.5)

    def set_memory(self, percent: float, *, swap_percent: float = 0.0,
                   swap_total: int = 0) -> None:
        total = 16 * GiB
        self.mem = MemoryStats(total=total, available=int(total * (100 - percent) / 100),
                               percent=percent, swap_total=swap_total,
                               swap_used=int(swap_total * swap_percent / 100),
                               swap_percent=swap_percent)


def make(tmp_path: Path, *, psi: bool = True, **settings: float
         ) -> tuple[PressureWatcher, FakeSource, FakeClock, Path]:
    root = proc_tree(tmp_path / "proc", psi=psi)
    clock = FakeClock()
    src = FakeSource(root)
    s = PressureSettings(proc_root=str(root), **settings)
    w = PressureWatcher(EventContext(hostname="box", clock=clock), s, source=src)
    return w, src, clock, root


def extra(ev: MemoryEvent) -> dict:
    return ev.metadata.model_extra or {}


def step(w: PressureWatcher, clock: FakeClock, dt: float = 10.0) -> list[MemoryEvent]:
    clock.advance(dt)
    return w.poll()


# --- the /proc readers ------------------------------------------------------------------------
def test_psi_and_vmstat_readers(tmp_path: Path) -> None:
    write_psi(tmp_path, "memory", 12.5, 3.25)
    write_psi(tmp_path, "cpu", 7.0, None)  # before Linux 5.13 cpu has no "full" line
    (tmp_path / "pressure" / "io").mkdir()  # unreadable (a kernel booted with psi=0 refuses)
    assert read_psi_file(tmp_path / "pressure" / "memory") == Psi(12.5, 3.25)
    assert read_psi(tmp_path / "pressure") == {"memory": Psi(12.5, 3.25), "cpu": Psi(7.0, None)}
    assert read_psi(tmp_path / "nowhere") is None
    (tmp_path / "pressure" / "cpu").write_text("garbage\n")
    assert read_psi_file(tmp_path / "pressure" / "cpu") is None

    write_vmstat(tmp_path, 17, 42)
    assert read_vmstat_swap(tmp_path / "vmstat") == (17, 42)
    (tmp_path / "vmstat").write_text("pswpin 1\n")
    assert read_vmstat_swap(tmp_path / "vmstat") is None
    assert read_vmstat_swap(tmp_path / "missing") is None


def test_real_system_source_reads_this_machine() -> None:
    src = SystemPressure("/proc", sample_s=0.05)
    mem = src.memory()
    assert mem is not None and mem.total > 0 and 0 <= mem.percent <= 100
    assert src.cpu_count() >= 1 and src.load() is not None
    if Path("/proc/pressure/memory").exists():
        psi = src.psi()
        assert psi is None or all(p.some_avg10 >= 0 for p in psi.values())
    snap = src.top_processes(3)
    assert len(snap.by_rss) <= 3 and len(snap.by_cpu) <= 3 and snap.by_rss
    rss = [p.rss for p in snap.by_rss]
    assert rss == sorted(rss, reverse=True)
    cpu = [p.cpu_percent for p in snap.by_cpu]
    assert cpu == sorted(cpu, reverse=True) and all(c > 0 for c in cpu)


# --- crossing, hysteresis, recovery -----------------------------------------------------------
def test_memory_crossing_once_no_repeat_then_recovered_below_rearm(tmp_path: Path) -> None:
    w, src, clock, _ = make(tmp_path)
    assert w.check_available() is None
    assert w.poll() == []  # nothing over a threshold: silent

    src.set_memory(93.0)
    [ev] = step(w, clock)
    assert (ev.category, ev.subcategory) == ("system.pressure", "memory")
    assert ev.severity == Severity.WARNING and ev.source == "watcher.pressure"
    assert ev.summary.startswith("System under memory pressure, the machine may be slow: "
                                 "memory 93% used")
    assert "threshold 90%" in ev.summary
    assert "top CPU: cc1plus (PID 101) 180%" in ev.summary
    assert "top memory: firefox (PID 202) 3072 MB" in ev.summary
    x = extra(ev)
    assert x["pressure"] == "memory_percent" and x["pressures"] == ["memory_percent"]
    assert x["value"] == 93.0 and x["threshold"] == 90.0 and x["level"] == "warning"
    assert x["memory_percent"] == 93.0 and x["memory_total_mb"] == 16384
    assert x["top_cpu"] == {"pid": 101, "name": "cc1plus", "cpu_percent": 180.0, "rss_mb": 900.0}
    assert x["top_rss"] == {"pid": 202, "name": "firefox", "cpu_percent": 12.0, "rss_mb": 3072.0}
    assert x["psi_memory_some"] == 0.0 and x["load_per_core"] == 0.125
    assert "pressure" in ev.metadata.tags and "slow" in ev.metadata.tags
    assert src.snapshots == 1

    for pct in (95.0, 80.0, 91.0, 72.5):  # still over 90 × 0.8 = 72: no repeat, no recovery
        src.set_memory(pct)
        assert step(w, clock) == [], pct
    assert src.snapshots == 1  # no snapshot without a crossing

    src.set_memory(70.0)
    [rec] = step(w, clock)
    assert (rec.category, rec.subcategory) == ("system.pressure", "recovered")
    assert rec.severity == Severity.INFO
    assert rec.summary.startswith("System memory pressure eased: memory 70% used")
    assert "back below 72%" in rec.summary
    assert extra(rec)["level"] == "ok" and extra(rec)["pressures"] == ["memory_percent"]
    assert "top_cpu" not in extra(rec)
    assert step(w, clock) == []

    src.set_memory(91.0)  # re-armed: the next crossing is news again
    [again] = step(w, clock)
    assert again.subcategory == "memory" and extra(again)["value"] == 91.0


def test_memory_critical_escalates_once(tmp_path: Path) -> None:
    w, src, clock, _ = make(tmp_path)
    src.set_memory(92.0)
    [warn] = w.poll()
    assert warn.severity == Severity.WARNING
    src.set_memory(98.5)
    [crit] = step(w, clock)
    assert crit.severity == Severity.CRITICAL and extra(crit)["level"] == "critical"
    assert extra(crit)["threshold"] == 97.0 and "(critical)" in crit.summary
    for pct in (93.0, 98.0, 85.0):
        src.set_memory(pct)
        assert step(w, clock) == [], pct
    src.set_memory(60.0)
    [rec] = step(w, clock)
    assert rec.subcategory == "recovered"


def test_critical_on_first_look_is_one_event(tmp_path: Path) -> None:
    w, src, _clock, _ = make(tmp_path)
    src.set_memory(99.0)
    [ev] = w.poll()
    assert ev.severity == Severity.CRITICAL and extra(ev)["threshold"] == 97.0


def test_psi_from_the_fake_tree_one_event_for_every_crossing(tmp_path: Path) -> None:
    w, _src, clock, root = make(tmp_path)
    assert w.poll() == []
    write_psi(root, "memory", 25.0, 8.0)
    write_psi(root, "io", 30.0, 1.0)
    [ev] = step(w, clock)
    x = extra(ev)
    assert ev.subcategory == "memory" and ev.severity == Severity.CRITICAL  # full stall
    assert x["pressures"] == ["psi_memory_full", "psi_memory_some", "psi_io_some"]
    assert x["thresholds"] == {"psi_memory_full": 5.0, "psi_memory_some": 10.0,
                               "psi_io_some": 20.0}
    assert x["psi_memory_some"] == 25.0 and x["psi_memory_full"] == 8.0
    assert x["psi_io_some"] == 30.0
    assert "memory pressure: all tasks stalled on memory 8.0% of the last 10 s" in ev.summary
    assert "io pressure: some tasks waiting on I/O 30.0%" in ev.summary
    assert ev.summary.startswith("System under memory and io pressure")
    assert "PSI avg10 (% of time stalled): cpu some 0.0; memory some 25.0, full 8.0" in ev.detail

    write_psi(root, "cpu", 65.0, None)
    [cpu] = step(w, clock)
    assert cpu.subcategory == "cpu" and cpu.severity == Severity.WARNING
    assert extra(cpu)["pressures"] == ["psi_cpu_some"]
    assert "some tasks waiting for CPU 65.0%" in cpu.summary

    write_psi(root, "memory", 0.5, 0.0)  # memory and io back; cpu still high
    write_psi(root, "io", 1.0, 0.0)
    [rec] = step(w, clock)
    assert rec.subcategory == "recovered"
    assert extra(rec)["pressures"] == ["psi_memory_full", "psi_memory_some", "psi_io_some"]
    assert rec.summary.startswith("System memory and io pressure eased")
    assert step(w, clock) == []


def test_swap_percent_and_swap_rate_from_vmstat(tmp_path: Path) -> None:
    w, src, clock, root = make(tmp_path)
    src.set_memory(50.0)  # no swap configured: the swap percent is not checked
    write_vmstat(root, 1000, 2000)
    assert w.poll() == []  # the first vmstat read is a baseline
    write_vmstat(root, 1000 + 6000, 2000 + 8000)  # 1400 pages/s over 10 s
    [ev] = step(w, clock, 10.0)
    x = extra(ev)
    assert ev.subcategory == "swap" and x["pressures"] == ["swap_pages_s"]
    assert x["swap_in_pages_s"] == 600.0 and x["swap_out_pages_s"] == 800.0
    assert x["value"] == 1400.0 and x["threshold"] == 1000.0
    assert "swapping 600 pages/s in and 800 out" in ev.summary
    assert "threshold 1000 pages/s" in ev.summary
    assert "swap_percent" not in x

    src.set_memory(50.0, swap_percent=65.0, swap_total=4 * GiB)
    # No new swapping: the rate recovers while the swap use crosses (one event each).
    crossing, recovered = step(w, clock, 10.0)
    assert crossing.subcategory == "swap" and extra(crossing)["pressures"] == ["swap_percent"]
    assert "swap 65% used (2.6 GiB of 4.0 GiB), threshold 50%" in crossing.summary
    assert extra(crossing)["swap_total_mb"] == 4096
    assert recovered.subcategory == "recovered"
    assert extra(recovered)["pressures"] == ["swap_pages_s"]
    assert step(w, clock, 10.0) == []


def test_swap_rate_recovers_and_counter_reset_is_skipped(tmp_path: Path) -> None:
    w, _src, clock, root = make(tmp_path)
    write_vmstat(root, 0, 0)
    w.poll()
    write_vmstat(root, 20000, 0)
    [ev] = step(w, clock, 10.0)
    assert ev.subcategory == "swap"
    write_vmstat(root, 20000, 0)  # no swapping over the next interval
    [rec] = step(w, clock, 10.0)
    assert rec.subcategory == "recovered" and extra(rec)["pressures"] == ["swap_pages_s"]
    write_vmstat(root, 5, 0)  # counters went back (reboot of a container's view): no rate
    assert step(w, clock, 10.0) == []
    write_vmstat(root, 5 + 50000, 0)
    [again] = step(w, clock, 10.0)
    assert extra(again)["swap_in_pages_s"] == 5000.0


def test_load_per_core(tmp_path: Path) -> None:
    w, src, clock, _ = make(tmp_path)
    src.loadavg = (9.0, 6.0, 3.0)  # 4 cores: 2.25 per core
    [ev] = w.poll()
    x = extra(ev)
    assert ev.subcategory == "load" and x["load_per_core"] == 2.25 and x["cpu_count"] == 4
    assert x["load1"] == 9.0 and x["load15"] == 3.0
    assert "load average 9.00 on 4 cores (2.25 per core), threshold 2 per core" in ev.summary
    src.loadavg = (7.0, 6.0, 3.0)  # 1.75 ≥ 1.6: still hot
    assert step(w, clock) == []
    src.loadavg = (6.0, 6.0, 3.0)  # 1.5 < 1.6
    [rec] = step(w, clock)
    assert rec.subcategory == "recovered"


# --- the snapshot -----------------------------------------------------------------------------
def test_top_process_snapshot_is_scrubbed_truncated_and_limited(tmp_path: Path) -> None:
    w, src, _clock, _ = make(tmp_path, max_cmdline_chars=60)
    src.procs = [TopProcess(1000 + i, f"worker{i}", ["worker", f"--n={i}"], 10.0 + i,
                            (100 + i) * MiB) for i in range(8)]
    src.procs.append(TopProcess(7, "mysql", ["mysql", "-u", "root", "-p", "hunter2",
                                             "--password", "s3cretvalue", "x" * 300],
                                500.0, 50 * MiB))
    src.set_memory(95.0)
    [ev] = w.poll()
    assert "hunter2" not in ev.detail and "s3cretvalue" not in ev.detail
    assert REDACTED in ev.detail
    lines = ev.detail.splitlines()
    cpu_at = lines.index("Top processes by CPU (over 0.5 s):")
    rss_at = lines.index("Top processes by memory (RSS):")
    cpu_lines, rss_lines = lines[cpu_at + 1:rss_at], lines[rss_at + 1:-1]
    assert len(cpu_lines) == 5 and len(rss_lines) == 5
    assert cpu_lines[0].startswith("  mysql (PID 7): 500% CPU, 50 MB RSS — mysql")
    assert max(len(line) for line in cpu_lines) < 140  # the command line is truncated
    assert cpu_lines[0].endswith("…")
    assert rss_lines[0].startswith("  worker7 (PID 1007): 17% CPU, 107 MB RSS — worker --n=7")
    x = extra(ev)
    assert x["top_cpu"]["pid"] == 7 and x["top_rss"]["pid"] == 1007
    assert [p["pid"] for p in x["top_cpu_processes"]] == [7, 1007, 1006, 1005, 1004]
    assert len(x["top_rss_processes"]) == 5


def test_snapshot_failure_still_reports_the_crossing(tmp_path: Path) -> None:
    w, src, _clock, _ = make(tmp_path)
    src.snapshot_error = PermissionError("no /proc access")
    src.set_memory(95.0)
    [ev] = w.poll()
    assert "Top processes: unavailable (PermissionError: no /proc access)" in ev.detail
    assert "top_cpu" not in extra(ev) and w.snapshot_failures == 1


# --- sources missing --------------------------------------------------------------------------
def test_psi_absent_drops_only_the_psi_checks(tmp_path: Path) -> None:
    w, src, clock, _root = make(tmp_path, psi=False)
    assert w.check_available() is None
    assert w.note is not None and "absent:" in w.note and "PSI (" in w.note.split("absent:")[1]
    assert "memory" in w.note.split(";")[0] and "load per core" in w.note
    assert w.poll() == []
    src.set_memory(96.0)
    [ev] = step(w, clock)
    assert ev.subcategory == "memory"
    assert not any(k.startswith("psi_") for k in extra(ev))
    assert "PSI: not available" in ev.detail


def test_unavailable_without_psi_and_memory(tmp_path: Path) -> None:
    w, src, _clock, _ = make(tmp_path, psi=False)
    src.mem_error = OSError("/proc/meminfo: permission denied")
    reason = w.check_available()
    assert reason is not None and reason.startswith("no pressure source: no PSI (")
    assert "psutil cannot read memory" in reason and "permission denied" in reason

    w2, src2, _, _ = make(tmp_path / "with-psi")
    src2.mem_error = OSError("denied")
    assert w2.check_available() is None  # PSI alone is enough
    assert w2.note is not None and "memory (psutil:" in w2.note


def test_every_source_failing_is_a_failure_not_silence(tmp_path: Path) -> None:
    w, src, _clock, _root = make(tmp_path, psi=False)
    src.mem_error = OSError("gone")
    src.load = lambda: (_ for _ in ()).throw(OSError("gone"))  # type: ignore[method-assign]
    src.cpu_count = lambda: (_ for _ in ()).throw(OSError("gone"))  # type: ignore[method-assign]
    src.psi = lambda: (_ for _ in ()).throw(OSError("gone"))  # type: ignore[method-assign]
    src.swap_pages = lambda: (_ for _ in ()).throw(OSError("gone"))  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="memory: OSError"):
        w.poll()


def test_every_check_off_is_unavailable(tmp_path: Path) -> None:
    off = {k: 0.0 for k in ("memory_percent", "memory_critical_percent", "swap_percent",
                            "swap_pages_per_s", "psi_cpu_some", "psi_memory_some",
                            "psi_memory_full", "psi_io_some", "psi_io_full", "load_per_core")}
    w, *_ = make(tmp_path, **off)
    assert "switched off" in (w.check_available() or "")
    w2, _src, _clock, root = make(tmp_path / "b", **{**off, "psi_io_full": 10.0})
    assert w2.check_available() is None
    write_psi(root, "io", 50.0, 12.0)
    [ev] = w2.poll()
    assert extra(ev)["pressures"] == ["psi_io_full"] and ev.severity == Severity.CRITICAL


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TR_WATCHERS_PRESSURE__MEMORY_PERCENT", "80")
    monkeypatch.setenv("TR_WATCHERS_PRESSURE__PSI_IO_SOME", "0")
    monkeypatch.setenv("TR_WATCHERS_PRESSURE__PROC_ROOT", str(tmp_path))
    monkeypatch.setenv("TR_WATCHERS_PRESSURE__INTERVAL_S", "2.5")
    s = Settings().pressure
    assert s.memory_percent == 80 and s.psi_io_some == 0 and s.proc_root == str(tmp_path)
    assert s.interval_s == 2.5
    d = PressureSettings()
    assert (d.interval_s, d.memory_percent, d.memory_critical_percent, d.swap_percent) == \
        (10.0, 90.0, 97.0, 50.0)
    assert (d.psi_memory_some, d.psi_io_some, d.psi_cpu_some, d.psi_memory_full) == \
        (10.0, 20.0, 50.0, 5.0)
    assert d.load_per_core == 2.0 and d.rearm_factor == 0.8 and d.top_n == 5
    assert os.path.isabs(d.proc_root)
