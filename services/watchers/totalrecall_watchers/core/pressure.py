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
The readings are `adapters/pressure.py`'s (`SystemPressure`), handed in by `container.py`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent

from .base import EventContext, Watcher
from .pressure_readings import (
    CATEGORY,
    Check,
    MemoryStats,
    PressureSource,
    Psi,
    Reading,
    TopProcess,
    TopSnapshot,
    build_checks,
)
from .pressure_render import PressureReport

if TYPE_CHECKING:
    from ..settings import PressureSettings

#: Re-exported: what other modules and tests know this watcher's parts by.
__all__ = ["CATEGORY", "MemoryStats", "PressureSource", "PressureWatcher", "Psi", "TopProcess",
           "TopSnapshot"]

log = logging.getLogger(__name__)


class PressureWatcher(Watcher):
    name = "pressure"

    def __init__(self, ctx: EventContext, settings: PressureSettings,
                 source: PressureSource, *, page_size: int = 4096) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.source = source
        self.checks = build_checks(settings)
        self.report = PressureReport(ctx, self.name, max_cmdline_chars=settings.max_cmdline_chars,
                                     rearm_factor=settings.rearm_factor, page_size=page_size)
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
            events.append(self.report.crossing(crossed, reading, values, self._snapshot()))
        if recovered:
            events.append(self.report.recovered(recovered, reading, values))
        return events

    def _snapshot(self) -> TopSnapshot | str:
        try:
            return self.source.top_processes(self.settings.top_n)
        except Exception as exc:  # the event matters more than its snapshot
            self.snapshot_failures += 1
            log.warning("pressure: top-process snapshot failed: %r", exc)
            return f"{type(exc).__name__}: {exc}"[:200]
