"""Pressure watcher, pure: the events of a poll's crossings and recoveries (what each check
says, the readings now, the top processes by CPU and by memory)."""

from __future__ import annotations

from typing import Any

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, human_bytes
from .pressure_readings import (
    CATEGORY,
    CHECK_ORDER,
    MB,
    PSI_RESOURCES,
    UNIT,
    Check,
    Reading,
    TopProcess,
    TopSnapshot,
)
from .scrub import scrub_cmdline, scrub_extra

MAX_NAME_CHARS = 64


class PressureReport:
    """Writes the pressure watcher's events (`source`: the watcher's name)."""

    def __init__(self, ctx: EventContext, source: str, *, max_cmdline_chars: int,
                 rearm_factor: float, page_size: int = 4096) -> None:
        self.ctx = ctx
        self.source = source
        #: Bytes per page, for the swap rate in MB/s (`adapters/pressure.page_size()`).
        self.page_size = page_size
        self.max_cmdline_chars = max_cmdline_chars
        self.rearm_factor = rearm_factor

    def describe(self, key: str, v: float, r: Reading) -> str:
        if key == "memory_percent" and r.memory is not None:
            return (f"memory {v:.0f}% used ({human_bytes(r.memory.available)} of "
                    f"{human_bytes(r.memory.total)} available)")
        if key == "swap_percent" and r.memory is not None:
            return (f"swap {v:.0f}% used ({human_bytes(r.memory.swap_used)} of "
                    f"{human_bytes(r.memory.swap_total)})")
        if key == "swap_pages_s":
            page = self.page_size
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
    def threshold(key: str, thr: float) -> str:
        return f"{thr:g}{UNIT.get(key, '%')}"

    def proc_meta(self, p: TopProcess) -> dict[str, Any]:
        return {"pid": p.pid, "name": scrub_extra(p.name or "?")[:MAX_NAME_CHARS],
                "cpu_percent": round(p.cpu_percent, 1), "rss_mb": round(p.rss / MB, 1)}

    def proc_line(self, p: TopProcess) -> str:
        name = scrub_extra(p.name or "?")[:MAX_NAME_CHARS]
        cmd = (scrub_cmdline(p.cmdline, self.max_cmdline_chars) if p.cmdline
               else f"[{name}]")
        return (f"  {name} (PID {p.pid}): {p.cpu_percent:.0f}% CPU, {p.rss / MB:.0f} MB RSS"
                f" — {cmd}")

    def readings_meta(self, r: Reading, values: dict[str, float]) -> dict[str, Any]:
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

    def now_lines(self, r: Reading, values: dict[str, float]) -> list[str]:
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

    def crossing(self, crossed: list[tuple[Check, int]], r: Reading, values: dict[str, float],
                 snap: TopSnapshot | str) -> MemoryEvent:
        """One event for every check that crossed in this poll (`snap`: the top processes, or
        why they could not be listed)."""
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
            described.append(f"{self.describe(c.key, values[c.key], r)}, threshold "
                             f"{self.threshold(c.key, thr)}{mark}")
        resources = list(dict.fromkeys(c.resource for c, _ in ranked))
        top_meta: dict[str, Any] = {}
        top_lines: list[str] = []
        blame = ""
        if isinstance(snap, TopSnapshot):
            window = f"over {snap.window_s:g} s" if snap.window_s > 0 else "since each started"
            top_lines.append(f"Top processes by CPU ({window}):")
            top_lines += [self.proc_line(p) for p in snap.by_cpu] or ["  (none used CPU)"]
            top_lines.append("Top processes by memory (RSS):")
            top_lines += [self.proc_line(p) for p in snap.by_rss] or ["  (none)"]
            parts = []
            if snap.by_cpu:
                p = snap.by_cpu[0]
                top_meta["top_cpu"] = self.proc_meta(p)
                parts.append(f"top CPU: {top_meta['top_cpu']['name']} (PID {p.pid}) "
                             f"{p.cpu_percent:.0f}%")
            if snap.by_rss:
                p = snap.by_rss[0]
                top_meta["top_rss"] = self.proc_meta(p)
                parts.append(f"top memory: {top_meta['top_rss']['name']} (PID {p.pid}) "
                             f"{p.rss / MB:.0f} MB")
            top_meta["top_cpu_processes"] = [self.proc_meta(p) for p in snap.by_cpu]
            top_meta["top_rss_processes"] = [self.proc_meta(p) for p in snap.by_rss]
            blame = (" — " + ", ".join(parts)) if parts else ""
        else:
            top_lines.append(f"Top processes: unavailable ({snap})")
        what = _join(resources)
        summary = (f"System under {what} pressure, the machine may be slow: "
                   + "; ".join(described) + blame)
        detail = "\n".join(
            [f"The machine is under {what} pressure and may be slow or unresponsive.",
             *(f"- {d}" for d in described), "", "Now:", *self.now_lines(r, values), "",
             *top_lines, f"host: {self.ctx.hostname}"])
        thresholds = {c.key: c.levels[level - 1][0] for c, level in ranked}
        return self.ctx.event(
            self.source, CATEGORY, primary.resource, summary, detail=detail, severity=severity,
            tags=["pressure", *resources, level_name, "slow"], level=level_name,
            pressure=primary.key, pressures=[c.key for c, _ in ranked],
            value=round(values[primary.key], 3), threshold=thresholds[primary.key],
            thresholds=thresholds, **self.readings_meta(r, values), **top_meta)

    def recovered(self, recovered: list[Check], r: Reading,
                  values: dict[str, float]) -> MemoryEvent:
        rearm = self.rearm_factor
        described = [f"{self.describe(c.key, values[c.key], r)}, back below "
                     f"{self.threshold(c.key, c.levels[0][0] * rearm)}" for c in recovered]
        resources = list(dict.fromkeys(c.resource for c in recovered))
        what = _join(resources)
        summary = f"System {what} pressure eased: " + "; ".join(described)
        detail = "\n".join([f"The machine's {what} pressure is back to normal.",
                            *(f"- {d}" for d in described), "", "Now:",
                            *self.now_lines(r, values), f"host: {self.ctx.hostname}"])
        return self.ctx.event(
            self.source, CATEGORY, "recovered", summary, detail=detail,
            tags=["pressure", *resources, "recovered"], level="ok",
            pressure=recovered[0].key, pressures=[c.key for c in recovered],
            value=round(values[recovered[0].key], 3),
            threshold=recovered[0].levels[0][0],
            rearm_thresholds={c.key: round(c.levels[0][0] * rearm, 4) for c in recovered},
            **self.readings_meta(r, values))


def _join(words: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
