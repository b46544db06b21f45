"""Pressure watcher, pure: what one poll reads (memory, PSI, swap rate, load, top processes),
the source protocol the readers implement, the checks and their thresholds, and the parsers of
`/proc/pressure/*` and `/proc/vmstat` text (the reading itself is adapters/pressure.py's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from totalrecall_schema import Severity

if TYPE_CHECKING:
    from ..settings import PressureSettings

CATEGORY = "system.pressure"
PSI_RESOURCES = ("cpu", "memory", "io")
MB = 1024 * 1024


@dataclass(frozen=True)
class MemoryStats:
    total: int
    available: int
    #: Used: (total - available) / total, in percent (psutil's `virtual_memory().percent`).
    percent: float
    swap_total: int = 0
    swap_used: int = 0
    swap_percent: float = 0.0


@dataclass(frozen=True)
class Psi:
    """One resource's line pair of `/proc/pressure/<resource>` (avg10, percent of time)."""

    some_avg10: float
    full_avg10: float | None = None  # cpu has no `full` line before Linux 5.13


@dataclass(frozen=True)
class TopProcess:
    pid: int
    name: str
    cmdline: list[str]
    #: Percent of one core over the sampling window (200: two cores busy).
    cpu_percent: float
    rss: int


@dataclass(frozen=True)
class TopSnapshot:
    by_cpu: list[TopProcess]
    by_rss: list[TopProcess]
    window_s: float


class PressureSource(Protocol):
    def memory(self) -> MemoryStats | None:
        """Memory and swap; None (or an exception) when they cannot be read."""
        ...

    def psi(self) -> dict[str, Psi] | None:
        """PSI by resource; None when there is no pressure directory."""
        ...

    def swap_pages(self) -> tuple[int, int] | None:
        """The cumulative `pswpin`, `pswpout` counters; None when unreadable."""
        ...

    def load(self) -> tuple[float, float, float] | None: ...

    def cpu_count(self) -> int: ...

    def top_processes(self, n: int) -> TopSnapshot: ...


def parse_psi(text: str) -> Psi | None:
    """One `/proc/pressure/<resource>` file's text → its avg10s; None when malformed."""
    some: float | None = None
    full: float | None = None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        fields = dict(f.split("=", 1) for f in rest.split() if "=" in f)
        try:
            value = float(fields["avg10"])
        except (KeyError, ValueError):
            continue
        if kind == "some":
            some = value
        elif kind == "full":
            full = value
    return None if some is None else Psi(some, full)


def parse_vmstat_swap(text: str) -> tuple[int, int] | None:
    """`pswpin`, `pswpout` (pages swapped in/out since boot) from `/proc/vmstat`'s text."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in ("pswpin", "pswpout"):
            try:
                found[key] = int(value.strip())
            except ValueError:
                return None
    if len(found) != 2:
        return None
    return found["pswpin"], found["pswpout"]


@dataclass(frozen=True)
class Check:
    key: str  # the reading it checks, e.g. "memory_percent"
    resource: str  # the event's subcategory: memory, swap, cpu, io, load
    #: Ascending (threshold, severity) levels; a value at or above one is at that level.
    levels: tuple[tuple[float, Severity], ...]


#: The checks in the order they are described (and the first is the primary on a tie).
CHECK_ORDER = ("psi_memory_full", "memory_percent", "psi_memory_some", "swap_pages_s",
               "swap_percent", "psi_io_full", "psi_io_some", "psi_cpu_some", "load_per_core")
RESOURCE = {"memory_percent": "memory", "psi_memory_some": "memory", "psi_memory_full": "memory",
            "swap_percent": "swap", "swap_pages_s": "swap", "psi_cpu_some": "cpu",
            "psi_io_some": "io", "psi_io_full": "io", "load_per_core": "load"}
UNIT = {"memory_percent": "%", "swap_percent": "%", "swap_pages_s": " pages/s",
        "load_per_core": " per core"}


def build_checks(s: PressureSettings) -> list[Check]:
    """The enabled checks (a threshold of 0 switches one off)."""
    w, c = Severity.WARNING, Severity.CRITICAL
    spec: dict[str, tuple[tuple[float, Severity], ...]] = {
        "memory_percent": ((s.memory_percent, w),
                           (max(s.memory_critical_percent, s.memory_percent), c))
        if s.memory_critical_percent > 0 else ((s.memory_percent, w),),
        "swap_percent": ((s.swap_percent, w),),
        "swap_pages_s": ((s.swap_pages_per_s, w),),
        "psi_cpu_some": ((s.psi_cpu_some, w),),
        "psi_memory_some": ((s.psi_memory_some, w),),
        "psi_memory_full": ((s.psi_memory_full, c),),
        "psi_io_some": ((s.psi_io_some, w),),
        "psi_io_full": ((s.psi_io_full, c),),
        "load_per_core": ((s.load_per_core, w),),
    }
    return [Check(k, RESOURCE[k], spec[k]) for k in CHECK_ORDER if spec[k][0][0] > 0]


@dataclass
class Reading:
    """What one poll read (None: that source is absent or failed)."""

    memory: MemoryStats | None = None
    psi: dict[str, Psi] | None = None
    swap_in_s: float | None = None
    swap_out_s: float | None = None
    load: tuple[float, float, float] | None = None
    cores: int = 1

    def values(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.memory is not None:
            out["memory_percent"] = self.memory.percent
            if self.memory.swap_total > 0:
                out["swap_percent"] = self.memory.swap_percent
        if self.swap_in_s is not None and self.swap_out_s is not None:
            out["swap_pages_s"] = self.swap_in_s + self.swap_out_s
        for res, p in (self.psi or {}).items():
            out[f"psi_{res}_some"] = p.some_avg10
            if p.full_avg10 is not None:
                out[f"psi_{res}_full"] = p.full_avg10
        if self.load is not None:
            out["load_per_core"] = self.load[0] / max(self.cores, 1)
        return out
