"""System pressure watcher: memory, swap, PSI stalls and load, with the processes behind them.

Every interval it reads:

* memory used % (psutil: (total - available) / total) and swap used % (psutil);
* the swap-in/out rate (`<proc_root>/vmstat` `pswpin` + `pswpout`, pages per second over one
  interval);
* PSI (`<proc_root>/pressure/{cpu,memory,io}`, the `some` and `full` `avg10`: the share of the
  last 10 s in which some / all non-idle tasks were stalled on that resource);
* the 1-minute load average per core (psutil).

A check crossing its threshold is reported once per crossing (category `system.pressure`,
subcategory the resource: `memory`, `swap`, `cpu`, `io`, `load`), with a snapshot of the top
processes by CPU and by RSS at that moment; every check that crossed in one poll goes into that
one event. A check re-arms, and one `recovered` event says so, when its value is back below
threshold × `rearm_factor`. Memory has a critical level too (`memory_critical_percent`): reaching
it after the warning is reported once more; a `full` PSI stall is critical at once.

Available when PSI or psutil's memory reading works; without `<proc_root>/pressure` (a kernel
without PSI, or booted with `psi=0`) the PSI checks are dropped and the `/health` note says so.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher, human_bytes
from .scrub import scrub_cmdline, scrub_extra

if TYPE_CHECKING:
    from ..settings import PressureSettings

log = logging.getLogger(__name__)

CATEGORY = "system.pressure"
PSI_RESOURCES = ("cpu", "memory", "io")
MB = 1024 * 1024
MAX_NAME_CHARS = 64


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


def read_psi_file(path: Path) -> Psi | None:
    """Parse one `/proc/pressure/<resource>` file; None when unreadable or malformed (a kernel
    booted with `psi=0` has the files but refuses to read them)."""
    try:
        text = path.read_text()
    except OSError:
        return None
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


class PressureWatcher(Watcher):
    name = "pressure"

    def __init__(self, ctx: EventContext, settings: PressureSettings,
                 source: PressureSource | None = None) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.source: PressureSource = source or SystemPressure(settings.proc_root,
                                                               settings.top_sample_s)
        self.checks = build_checks(settings)
        self.level: dict[str, int] = {}  # the level with hysteresis (0 ok)
        self.alerted: dict[str, int] = {}  # the level last reported in this episode
        self._swap_prev: tuple[float, int, int] | None = None
        self.crossings = 0
        self.snapshot_failures = 0

    def stats(self) -> dict[str, int]:
        return {"pressures_active": sum(1 for v in self.alerted.values() if v > 0),
                "crossings": self.crossings}

    # --- availability ---------------------------------------------------------------------------
    def check_available(self) -> str | None:
        if not self.checks:
            return "every pressure check is switched off (all thresholds 0)"
        pressure_dir = Path(self.settings.proc_root) / "pressure"
        mem: MemoryStats | None = None
        mem_error = "no reading"
        try:
            mem = self.source.memory()
        except Exception as exc:
            mem_error = repr(exc)[:200]
        try:
            psi = self.source.psi()
        except Exception as exc:
            log.warning("pressure: reading PSI failed: %r", exc)
            psi = None
        if mem is None and not psi:
            return (f"no pressure source: no PSI ({pressure_dir} missing or unreadable: a kernel "
                    f"without CONFIG_PSI or booted with psi=0) and psutil cannot read memory "
                    f"({mem_error})")
        watching: list[str] = []
        absent: list[str] = []
        if mem is not None:
            watching.append("memory")
            if mem.swap_total > 0:
                watching.append("swap")
            else:
                absent.append("swap (none configured)")
        else:
            absent.append(f"memory (psutil: {mem_error})")
        try:
            swap_pages = self.source.swap_pages()
        except Exception:
            swap_pages = None
        if swap_pages is not None:
            watching.append("swap-in/out rate")
        else:
            absent.append(f"swap-in/out rate ({Path(self.settings.proc_root) / 'vmstat'})")
        if psi:
            watching.append("PSI (" + ", ".join(sorted(psi)) + ")")
        else:
            absent.append(f"PSI ({pressure_dir})")
        watching.append("load per core")
        self.note = "watching: " + ", ".join(watching)
        if absent:
            self.note += "; absent: " + ", ".join(absent)
        return None

    # --- polling --------------------------------------------------------------------------------
    def _read(self) -> Reading:
        r = Reading()
        failures: list[str] = []

        def attempt(what: str, fn: Any) -> Any:
            try:
                return fn()
            except Exception as exc:  # one broken source must not hide the others
                log.warning("pressure source %s failed: %r", what, exc)
                failures.append(f"{what}: {exc!r}"[:200])
                return None

        r.memory = attempt("memory", self.source.memory)
        r.psi = attempt("psi", self.source.psi) or None
        r.load = attempt("load", self.source.load)
        r.cores = attempt("cpu_count", self.source.cpu_count) or 1
        pages = attempt("vmstat", self.source.swap_pages)
        now = self.ctx.clock.monotonic()
        if pages is not None:
            prev, self._swap_prev = self._swap_prev, (now, pages[0], pages[1])
            if prev is not None and now > prev[0] and pages[0] >= prev[1] and pages[1] >= prev[2]:
                dt = now - prev[0]
                r.swap_in_s, r.swap_out_s = (pages[0] - prev[1]) / dt, (pages[1] - prev[2]) / dt
        if len(failures) == 5:
            raise RuntimeError("; ".join(failures))
        return r

    def poll(self) -> list[MemoryEvent]:
        reading = self._read()
        values = reading.values()
        rearm = self.settings.rearm_factor
        crossed: list[tuple[Check, int]] = []
        recovered: list[Check] = []
        for check in self.checks:
            v = values.get(check.key)
            if v is None:
                continue  # absent this poll (no swap, no PSI, the first vmstat read): state kept
            prev = self.level.get(check.key, 0)
            level = 0
            for i in range(len(check.levels), 0, -1):
                thr = check.levels[i - 1][0]
                if v >= thr or (prev >= i and v >= thr * rearm):
                    level = i
                    break
            self.level[check.key] = level
            alerted = self.alerted.get(check.key, 0)
            if level > alerted:
                crossed.append((check, level))
                self.alerted[check.key] = level
            elif level == 0 and alerted > 0:
                recovered.append(check)
                self.alerted[check.key] = 0
            elif level < alerted:
                self.alerted[check.key] = level  # critical → warning: re-arms the critical level
        events: list[MemoryEvent] = []
        if crossed:
            self.crossings += 1
            events.append(self._crossing_event(crossed, reading, values))
        if recovered:
            events.append(self._recovered_event(recovered, reading, values))
        return events

    # --- events ---------------------------------------------------------------------------------
    def _describe(self, key: str, v: float, r: Reading) -> str:
        if key == "memory_percent" and r.memory is not None:
            return (f"memory {v:.0f}% used ({human_bytes(r.memory.available)} of "
                    f"{human_bytes(r.memory.total)} available)")
        if key == "swap_percent" and r.memory is not None:
            return (f"swap {v:.0f}% used ({human_bytes(r.memory.swap_used)} of "
                    f"{human_bytes(r.memory.swap_total)})")
        if key == "swap_pages_s":
            page = _page_size()
            return (f"swapping {r.swap_in_s or 0:.0f} pages/s in and {r.swap_out_s or 0:.0f} out "
                    f"({v * page / MB:.1f} MB/s)")
        if key == "load_per_core" and r.load is not None:
            return (f"load average {r.load[0]:.2f} on {r.cores} cores "
                    f"({v:.2f} per core)")
        if key.startswith("psi_"):
            _, res, kind = key.split("_")
            who = "some tasks" if kind == "some" else "all tasks"
            what = {"cpu": "waiting for CPU", "memory": "stalled on memory",
                    "io": "waiting on I/O"}[res]
            return f"{res} pressure: {who} {what} {v:.1f}% of the last 10 s (PSI {kind} avg10)"
        return f"{key} {v:g}"

    @staticmethod
    def _threshold(key: str, thr: float) -> str:
        return f"{thr:g}{UNIT.get(key, '%')}"

    def _snapshot(self) -> TopSnapshot | str:
        try:
            return self.source.top_processes(self.settings.top_n)
        except Exception as exc:  # the event matters more than its snapshot
            self.snapshot_failures += 1
            log.warning("pressure: top-process snapshot failed: %r", exc)
            return f"{type(exc).__name__}: {exc}"[:200]

    def _proc_meta(self, p: TopProcess) -> dict[str, Any]:
        return {"pid": p.pid, "name": scrub_extra(p.name or "?")[:MAX_NAME_CHARS],
                "cpu_percent": round(p.cpu_percent, 1), "rss_mb": round(p.rss / MB, 1)}

    def _proc_line(self, p: TopProcess) -> str:
        name = scrub_extra(p.name or "?")[:MAX_NAME_CHARS]
        cmd = (scrub_cmdline(p.cmdline, self.settings.max_cmdline_chars) if p.cmdline
               else f"[{name}]")
        return (f"  {name} (PID {p.pid}): {p.cpu_percent:.0f}% CPU, {p.rss / MB:.0f} MB RSS"
                f" — {cmd}")

    def _readings_meta(self, r: Reading, values: dict[str, float]) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if r.memory is not None:
            meta.update(memory_percent=round(r.memory.percent, 1),
                        memory_available_mb=round(r.memory.available / MB),
                        memory_total_mb=round(r.memory.total / MB))
            if r.memory.swap_total > 0:
                meta.update(swap_percent=round(r.memory.swap_percent, 1),
                            swap_used_mb=round(r.memory.swap_used / MB),
                            swap_total_mb=round(r.memory.swap_total / MB))
        if r.swap_in_s is not None and r.swap_out_s is not None:
            meta.update(swap_in_pages_s=round(r.swap_in_s, 1),
                        swap_out_pages_s=round(r.swap_out_s, 1))
        for key, v in values.items():
            if key.startswith("psi_"):
                meta[key] = round(v, 2)
        if r.load is not None:
            meta.update(load1=round(r.load[0], 2), load5=round(r.load[1], 2),
                        load15=round(r.load[2], 2), load_per_core=round(values["load_per_core"], 3),
                        cpu_count=r.cores)
        return meta

    def _now_lines(self, r: Reading, values: dict[str, float]) -> list[str]:
        lines: list[str] = []
        if r.memory is not None:
            lines.append(f"memory: {r.memory.percent:.1f}% used, "
                         f"{human_bytes(r.memory.available)} of {human_bytes(r.memory.total)} "
                         "available")
            lines.append(f"swap: {r.memory.swap_percent:.1f}% used of "
                         f"{human_bytes(r.memory.swap_total)}" if r.memory.swap_total > 0
                         else "swap: none")
        if r.swap_in_s is not None and r.swap_out_s is not None:
            lines.append(f"swap-in/out: {r.swap_in_s:.0f} / {r.swap_out_s:.0f} pages/s")
        if r.psi:
            parts = []
            for res in PSI_RESOURCES:
                p = r.psi.get(res)
                if p is None:
                    continue
                full = f", full {p.full_avg10:.1f}" if p.full_avg10 is not None else ""
                parts.append(f"{res} some {p.some_avg10:.1f}{full}")
            lines.append("PSI avg10 (% of time stalled): " + "; ".join(parts))
        else:
            lines.append("PSI: not available")
        if r.load is not None:
            lines.append(f"load average: {r.load[0]:.2f} {r.load[1]:.2f} {r.load[2]:.2f} "
                         f"on {r.cores} cores ({values['load_per_core']:.2f} per core)")
        return lines

    def _crossing_event(self, crossed: list[tuple[Check, int]], r: Reading,
                        values: dict[str, float]) -> MemoryEvent:
        def sev(c: Check, level: int) -> Severity:
            return c.levels[level - 1][1]

        order = {Severity.CRITICAL: 0, Severity.ERROR: 1, Severity.WARNING: 2, Severity.INFO: 3}
        ranked = sorted(crossed, key=lambda cl: (order[sev(*cl)], CHECK_ORDER.index(cl[0].key)))
        primary, p_level = ranked[0]
        severity = sev(primary, p_level)
        level_name = "critical" if severity == Severity.CRITICAL else "warning"
        described = []
        for c, level in ranked:
            thr = c.levels[level - 1][0]
            mark = " (critical)" if sev(c, level) == Severity.CRITICAL else ""
            described.append(f"{self._describe(c.key, values[c.key], r)}, threshold "
                             f"{self._threshold(c.key, thr)}{mark}")
        resources = list(dict.fromkeys(c.resource for c, _ in ranked))
        snap = self._snapshot()
        top_meta: dict[str, Any] = {}
        top_lines: list[str] = []
        blame = ""
        if isinstance(snap, TopSnapshot):
            window = f"over {snap.window_s:g} s" if snap.window_s > 0 else "since each started"
            top_lines.append(f"Top processes by CPU ({window}):")
            top_lines += [self._proc_line(p) for p in snap.by_cpu] or ["  (none used CPU)"]
            top_lines.append("Top processes by memory (RSS):")
            top_lines += [self._proc_line(p) for p in snap.by_rss] or ["  (none)"]
            parts = []
            if snap.by_cpu:
                p = snap.by_cpu[0]
                top_meta["top_cpu"] = self._proc_meta(p)
                parts.append(f"top CPU: {top_meta['top_cpu']['name']} (PID {p.pid}) "
                             f"{p.cpu_percent:.0f}%")
            if snap.by_rss:
                p = snap.by_rss[0]
                top_meta["top_rss"] = self._proc_meta(p)
                parts.append(f"top memory: {top_meta['top_rss']['name']} (PID {p.pid}) "
                             f"{p.rss / MB:.0f} MB")
            top_meta["top_cpu_processes"] = [self._proc_meta(p) for p in snap.by_cpu]
            top_meta["top_rss_processes"] = [self._proc_meta(p) for p in snap.by_rss]
            blame = (" — " + ", ".join(parts)) if parts else ""
        else:
            top_lines.append(f"Top processes: unavailable ({snap})")
        what = _join(resources)
        summary = (f"System under {what} pressure, the machine may be slow: "
                   + "; ".join(described) + blame)
        detail = "\n".join(
            [f"The machine is under {what} pressure and may be slow or unresponsive.",
             *(f"- {d}" for d in described), "", "Now:", *self._now_lines(r, values), "",
             *top_lines, f"host: {self.ctx.hostname}"])
        thresholds = {c.key: c.levels[level - 1][0] for c, level in ranked}
        return self.ctx.event(
            self.name, CATEGORY, primary.resource, summary, detail=detail, severity=severity,
            tags=["pressure", *resources, level_name, "slow"], level=level_name,
            pressure=primary.key, pressures=[c.key for c, _ in ranked],
            value=round(values[primary.key], 3), threshold=thresholds[primary.key],
            thresholds=thresholds, **self._readings_meta(r, values), **top_meta)

    def _recovered_event(self, recovered: list[Check], r: Reading,
                         values: dict[str, float]) -> MemoryEvent:
        rearm = self.settings.rearm_factor
        described = [f"{self._describe(c.key, values[c.key], r)}, back below "
                     f"{self._threshold(c.key, c.levels[0][0] * rearm)}" for c in recovered]
        resources = list(dict.fromkeys(c.resource for c in recovered))
        what = _join(resources)
        summary = f"System {what} pressure eased: " + "; ".join(described)
        detail = "\n".join([f"The machine's {what} pressure is back to normal.",
                            *(f"- {d}" for d in described), "", "Now:",
                            *self._now_lines(r, values), f"host: {self.ctx.hostname}"])
        return self.ctx.event(
            self.name, CATEGORY, "recovered", summary, detail=detail,
            tags=["pressure", *resources, "recovered"], level="ok",
            pressure=recovered[0].key, pressures=[c.key for c in recovered],
            value=round(values[recovered[0].key], 3),
            threshold=recovered[0].levels[0][0],
            rearm_thresholds={c.key: round(c.levels[0][0] * rearm, 4) for c in recovered},
            **self._readings_meta(r, values))


def _join(words: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _page_size() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4096
