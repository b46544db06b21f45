"""Pressure watcher's I/O: psutil for memory, swap, load and processes; `<proc_root>` for PSI
and vmstat. What the numbers mean is core/pressure*.py's business."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..core.pressure_readings import (
    PSI_RESOURCES,
    MemoryStats,
    Psi,
    TopProcess,
    TopSnapshot,
    parse_psi,
    parse_vmstat_swap,
)


def page_size() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4096


def read_psi_file(path: Path) -> Psi | None:
    """Parse one `/proc/pressure/<resource>` file; None when unreadable or malformed (a kernel
    booted with `psi=0` has the files but refuses to read them)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return parse_psi(text)


def read_psi(pressure_dir: Path) -> dict[str, Psi] | None:
    """PSI of cpu, memory and io under `pressure_dir`; None when the directory is absent or
    none of its files can be read."""
    if not pressure_dir.is_dir():
        return None
    out = {r: p for r in PSI_RESOURCES if (p := read_psi_file(pressure_dir / r)) is not None}
    return out or None


def read_vmstat_swap(path: Path) -> tuple[int, int] | None:
    """`pswpin`, `pswpout` (pages swapped in/out since boot) from a `/proc/vmstat`."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return parse_vmstat_swap(text)


class SystemPressure:
    """The real sources: psutil for memory, swap, load and processes; `<proc_root>` for PSI and
    vmstat."""

    def __init__(self, proc_root: str = "/proc", sample_s: float = 0.5) -> None:
        self.root = Path(proc_root)
        self.sample_s = sample_s

    def memory(self) -> MemoryStats | None:
        import psutil

        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        return MemoryStats(total=int(vm.total), available=int(vm.available),
                           percent=float(vm.percent), swap_total=int(sw.total),
                           swap_used=int(sw.used), swap_percent=float(sw.percent))

    def psi(self) -> dict[str, Psi] | None:
        return read_psi(self.root / "pressure")

    def swap_pages(self) -> tuple[int, int] | None:
        return read_vmstat_swap(self.root / "vmstat")

    def load(self) -> tuple[float, float, float] | None:
        import psutil

        l1, l5, l15 = psutil.getloadavg()
        return float(l1), float(l5), float(l15)

    def cpu_count(self) -> int:
        import psutil

        return psutil.cpu_count() or os.cpu_count() or 1

    def top_processes(self, n: int) -> TopSnapshot:
        """The top `n` processes by CPU (measured over `sample_s`) and by RSS."""
        import psutil

        def cpu_times() -> dict[tuple[int, float], float]:
            out: dict[tuple[int, float], float] = {}
            for p in psutil.process_iter(["create_time", "cpu_times"], ad_value=None):
                ct, born = p.info.get("cpu_times"), p.info.get("create_time")
                if ct is not None and born is not None:
                    out[(p.pid, float(born))] = ct.user + ct.system
            return out

        before = cpu_times() if self.sample_s > 0 else {}
        t0 = time.monotonic()
        if self.sample_s > 0:
            time.sleep(self.sample_s)
        rows: list[tuple[int, str, float, int]] = []
        now = time.time()
        for p in psutil.process_iter(["name", "create_time", "cpu_times", "memory_info"],
                                     ad_value=None):
            info = p.info
            ct, mi, born = info.get("cpu_times"), info.get("memory_info"), info.get("create_time")
            if born is None:
                continue
            spent = (ct.user + ct.system) if ct is not None else 0.0
            if self.sample_s > 0:
                dt = max(time.monotonic() - t0, 1e-3)
                prev = before.get((p.pid, float(born)))
                cpu = max(0.0, (spent - prev) / dt * 100) if prev is not None else 0.0
            else:  # no window: the average since the process started
                cpu = spent / max(now - float(born), 1.0) * 100
            rows.append((p.pid, info.get("name") or "?", cpu, mi.rss if mi is not None else 0))
        by_cpu = sorted((r for r in rows if r[2] > 0), key=lambda r: r[2], reverse=True)[:n]
        by_rss = sorted(rows, key=lambda r: r[3], reverse=True)[:n]
        cmdlines: dict[int, list[str]] = {}
        for pid in {r[0] for r in (*by_cpu, *by_rss)}:
            try:
                cmdlines[pid] = psutil.Process(pid).cmdline()
            except (psutil.Error, OSError):
                cmdlines[pid] = []

        def top(r: tuple[int, str, float, int]) -> TopProcess:
            return TopProcess(pid=r[0], name=r[1], cmdline=cmdlines.get(r[0], []),
                              cpu_percent=r[2], rss=r[3])

        return TopSnapshot([top(r) for r in by_cpu], [top(r) for r in by_rss], self.sample_s)
