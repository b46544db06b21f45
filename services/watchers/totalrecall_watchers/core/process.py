"""Process watcher: report processes that newly cross a CPU or memory threshold, and their exit.

CPU is measured as the delta of (user + system) CPU time between two samples divided by the
wall time between them: the average over one whole interval, in percent of one core (a process
busy on two cores reads 200 %). Only changes are reported: a process alerts once per crossing
and re-arms when it falls below threshold × `rearm_factor`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher, human_bytes
from .scrub import scrub_cmdline, scrub_extra

MAX_TRACKED = 2000


@dataclass(frozen=True)
class ProcSample:
    pid: int
    create_time: float
    name: str
    cmdline: list[str]
    username: str | None
    cpu_time: float  # user + system seconds
    rss: int
    mem_percent: float
    zombie: bool = False

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)


class ProcessSource(Protocol):
    def sample(self) -> list[ProcSample]: ...


class PsutilProcessSource:
    def sample(self) -> list[ProcSample]:
        import psutil

        out: list[ProcSample] = []
        attrs = ["pid", "name", "cmdline", "username", "cpu_times", "memory_info",
                 "memory_percent", "create_time", "status"]
        for p in psutil.process_iter(attrs, ad_value=None):
            info = p.info
            ct = info.get("cpu_times")
            mi = info.get("memory_info")
            if info.get("create_time") is None:
                continue
            out.append(ProcSample(
                pid=info["pid"], create_time=float(info["create_time"]),
                name=info.get("name") or "?", cmdline=list(info.get("cmdline") or []),
                username=info.get("username"),
                cpu_time=(ct.user + ct.system) if ct is not None else 0.0,
                rss=mi.rss if mi is not None else 0,
                mem_percent=float(info.get("memory_percent") or 0.0),
                zombie=info.get("status") == psutil.STATUS_ZOMBIE,
            ))
        return out


@dataclass
class Tracked:
    sample: ProcSample
    high_cpu: bool = False
    high_mem: bool = False
    peak_cpu: float = 0.0
    peak_rss: int = 0
    alerts: list[str] = field(default_factory=list)


@dataclass
class ProcessThresholds:
    cpu_percent: float = 50.0
    rss_mb: float = 2048.0
    mem_percent: float = 25.0
    rearm_factor: float = 0.8
    max_cmdline_chars: int = 1000


class ProcessWatcher(Watcher):
    name = "process"

    def __init__(self, ctx: EventContext, *, interval_s: float = 30.0,
                 thresholds: ProcessThresholds | None = None,
                 source: ProcessSource | None = None) -> None:
        super().__init__(ctx)
        self.interval_s = interval_s
        self.t = thresholds or ProcessThresholds()
        self.source: ProcessSource = source or PsutilProcessSource()
        self._prev: dict[tuple[int, float], ProcSample] = {}
        self._prev_t: float | None = None
        self.tracked: OrderedDict[tuple[int, float], Tracked] = OrderedDict()

    # --- the change detector -----------------------------------------------------------------
    def poll(self) -> list[MemoryEvent]:
        now = self.ctx.clock.monotonic()
        samples = [s for s in self.source.sample() if not s.zombie]
        current = {s.key: s for s in samples}
        events: list[MemoryEvent] = []
        if self._prev_t is not None:
            dt = max(now - self._prev_t, 1e-6)
            for key, s in current.items():
                prev = self._prev.get(key)
                cpu = None if prev is None else max(0.0, (s.cpu_time - prev.cpu_time) / dt * 100)
                events.extend(self._check(s, cpu, dt))
            for key in [k for k in self.tracked if k not in current]:
                tr = self.tracked.pop(key)
                events.append(self._exit_event(tr))
        self._prev, self._prev_t = current, now
        return events

    def _check(self, s: ProcSample, cpu: float | None, dt: float) -> list[MemoryEvent]:
        t = self.t
        tr = self.tracked.get(s.key)
        out: list[MemoryEvent] = []
        rss_over = s.rss >= t.rss_mb * 1024 * 1024 or s.mem_percent >= t.mem_percent
        cpu_over = cpu is not None and cpu >= t.cpu_percent
        if tr is None and not (cpu_over or rss_over):
            return out
        if tr is None:
            tr = self._track(s)
        tr.sample = s
        if cpu is not None:
            tr.peak_cpu = max(tr.peak_cpu, cpu)
        tr.peak_rss = max(tr.peak_rss, s.rss)
        if cpu_over and not tr.high_cpu:
            tr.high_cpu = True
            tr.alerts.append("cpu")
            out.append(self._cpu_event(s, cpu or 0.0, dt))
        elif tr.high_cpu and cpu is not None and cpu < t.cpu_percent * t.rearm_factor:
            tr.high_cpu = False  # re-armed: the next crossing alerts again
        if rss_over and not tr.high_mem:
            tr.high_mem = True
            tr.alerts.append("mem")
            out.append(self._mem_event(s))
        elif tr.high_mem and s.rss < t.rss_mb * 1024 * 1024 * t.rearm_factor \
                and s.mem_percent < t.mem_percent * t.rearm_factor:
            tr.high_mem = False
        return out

    def _track(self, s: ProcSample) -> Tracked:
        tr = Tracked(sample=s)
        self.tracked[s.key] = tr
        while len(self.tracked) > MAX_TRACKED:
            self.tracked.popitem(last=False)
        return tr

    # --- events ------------------------------------------------------------------------------
    def _describe(self, s: ProcSample) -> tuple[str, str]:
        name = scrub_extra(s.name or "?")
        cmd = scrub_cmdline(s.cmdline, self.t.max_cmdline_chars) if s.cmdline else f"[{name}]"
        started = datetime.fromtimestamp(s.create_time, UTC).isoformat(timespec="seconds")
        lines = [f"command: {cmd}", f"user: {s.username or '?'}",
                 f"RSS: {human_bytes(s.rss)} ({s.mem_percent:.1f}% of RAM)",
                 f"started: {started}", f"host: {self.ctx.hostname}"]
        return name, "\n".join(lines)

    def _common(self, s: ProcSample) -> dict[str, Any]:
        return {"pid": s.pid, "process": scrub_extra(s.name or "?"), "user": s.username or "?",
                "rss_bytes": s.rss, "mem_percent": round(s.mem_percent, 2)}

    def _cpu_event(self, s: ProcSample, cpu: float, dt: float) -> MemoryEvent:
        name, detail = self._describe(s)
        detail = f"CPU: {cpu:.0f}% of one core averaged over {dt:.1f}s\n" + detail
        return self.ctx.event(
            self.name, "system.process", "high_cpu",
            f"{name} (PID {s.pid}) using {cpu:.0f}% CPU", detail=detail,
            severity=Severity.WARNING, tags=["process", "high_cpu", name],
            cpu_percent=round(cpu, 1), **self._common(s))

    def _mem_event(self, s: ProcSample) -> MemoryEvent:
        name, detail = self._describe(s)
        return self.ctx.event(
            self.name, "system.process", "high_mem",
            f"{name} (PID {s.pid}) using {human_bytes(s.rss)} RAM ({s.mem_percent:.0f}% of memory)",
            detail=detail, severity=Severity.WARNING, tags=["process", "high_mem", name],
            **self._common(s))

    def _exit_event(self, tr: Tracked) -> MemoryEvent:
        s = tr.sample
        name, detail = self._describe(s)
        what = " and ".join({"cpu": "CPU", "mem": "memory"}[a] for a in dict.fromkeys(tr.alerts))
        ran = max(0.0, self.ctx.clock.now().timestamp() - s.create_time)
        detail = (f"peak CPU: {tr.peak_cpu:.0f}% of one core; "
                  f"peak RSS: {human_bytes(tr.peak_rss)}\n"
                  f"ran for about {ran:.0f}s\n"
                  "exit code: unknown (not a child of the watcher; psutil cannot report it)\n"
                  + detail)
        return self.ctx.event(
            self.name, "system.process", "exit",
            f"{name} (PID {s.pid}) exited after high {what} use "
            f"(peak {tr.peak_cpu:.0f}% CPU, {human_bytes(tr.peak_rss)} RSS)",
            detail=detail, severity=Severity.INFO, tags=["process", "exit", name],
            peak_cpu_percent=round(tr.peak_cpu, 1), peak_rss_bytes=tr.peak_rss,
            **self._common(s))
