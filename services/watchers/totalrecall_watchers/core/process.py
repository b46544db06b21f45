"""Process watcher: report processes that newly cross a CPU or memory threshold, and their exit.

CPU is measured as the delta of (user + system) CPU time between two samples divided by the
wall time between them: the average over one whole interval, in percent of one core (a process
busy on two cores reads 200 %). Only changes are reported: a process alerts once per crossing
and re-arms when it falls below threshold × `rearm_factor`.

When a tracked (hot) process goes away, its wait status comes from the kernel's process
connector or its zombie (`adapters/proc_connector.py`): `crash` when killed by a signal or
exiting non-zero (with `exit_code` or `signal`/`signal_name` in the metadata), `exit` when it
exited 0 or how it ended is unknowable (not root, no connector, reaped before the next poll).
The process table is read by `adapters/process_table.py`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher, human_bytes
from .procexit import ExitStatus
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
    #: A zombie's wait status (waitpid form) when readable.
    exit_status: int | None = None

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)


class ProcessSource(Protocol):
    def sample(self) -> list[ProcSample]: ...


class ExitSource(Protocol):
    def start(self) -> bool: ...

    def lookup(self, pid: int, *, not_before: float = 0.0, wait_s: float = 0.2) -> int | None: ...

    def close(self) -> None: ...


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

    def __init__(self, ctx: EventContext, *, source: ProcessSource, interval_s: float = 30.0,
                 thresholds: ProcessThresholds | None = None,
                 exits: ExitSource | None = None) -> None:
        super().__init__(ctx)
        self.interval_s = interval_s
        self.t = thresholds or ProcessThresholds()
        self.source = source
        #: The kernel's process-exit events (None: a zombie's status only).
        self.exits: ExitSource | None = exits
        self._exits_started = False
        self.exit_statuses_known = 0
        self._prev: dict[tuple[int, float], ProcSample] = {}
        self._prev_t: float | None = None
        self.tracked: OrderedDict[tuple[int, float], Tracked] = OrderedDict()

    # --- the change detector -----------------------------------------------------------------
    def _start_exits(self) -> None:
        if self._exits_started and self.exits is not None \
                and getattr(self.exits, "running", True) is False:
            self._exits_started = False  # the listener died (its error is in the note): restart
        if self._exits_started or self.exits is None:
            return
        self._exits_started = True
        if self.exits.start():
            self.note = "exit statuses: kernel process connector"
        else:
            reason = getattr(self.exits, "error", None) or "unavailable"
            self.note = f"exit statuses: zombies only ({reason})"
            self.exits = None

    def close(self) -> None:
        if self.exits is not None:
            self.exits.close()
        self._exits_started = False

    def stats(self) -> dict[str, int]:
        out = {"tracked": len(self.tracked), "exit_statuses_known": self.exit_statuses_known}
        overruns = getattr(self.exits, "overruns", None)
        if isinstance(overruns, int):
            out["exit_events_lost"] = overruns
        return out

    def poll(self) -> list[MemoryEvent]:
        self._start_exits()
        now = self.ctx.clock.monotonic()
        everything = self.source.sample()
        zombies = {s.key: s for s in everything if s.zombie}
        samples = [s for s in everything if not s.zombie]
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
                events.append(self._exit_event(tr, self._exit_status(tr.sample, zombies.get(key))))
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

    def _exit_status(self, s: ProcSample, zombie: ProcSample | None) -> ExitStatus | None:
        status = zombie.exit_status if zombie is not None else None
        if status is None and self.exits is not None:
            status = self.exits.lookup(s.pid, not_before=s.create_time - 1.0)
        if status is None:
            return None
        self.exit_statuses_known += 1
        return ExitStatus(status)

    def _exit_event(self, tr: Tracked, how: ExitStatus | None = None) -> MemoryEvent:
        s = tr.sample
        name, detail = self._describe(s)
        what = " and ".join({"cpu": "CPU", "mem": "memory"}[a] for a in dict.fromkeys(tr.alerts))
        ran = max(0.0, self.ctx.clock.now().timestamp() - s.create_time)
        peak = f"peak {tr.peak_cpu:.0f}% CPU, {human_bytes(tr.peak_rss)} RSS"
        extra: dict[str, Any] = {}
        if how is None:
            ended = "exit code: unknown (not a child of the watcher and no process connector)"
            sub, severity = "exit", Severity.INFO
            summary = f"{name} (PID {s.pid}) exited after high {what} use ({peak})"
        else:
            ended = f"ended: {how.describe()} (wait status {how.status})"
            crashed = how.signal is not None or bool(how.exit_code)
            sub = "crash" if crashed else "exit"
            severity = Severity.ERROR if crashed else Severity.INFO
            summary = f"{name} (PID {s.pid}) {how.describe()} after high {what} use ({peak})"
            extra["exit_code"] = how.exit_code
            if how.signal is not None:
                extra.update(signal=how.signal, signal_name=how.signal_name,
                             core_dumped=how.core_dumped)
        detail = (f"peak CPU: {tr.peak_cpu:.0f}% of one core; "
                  f"peak RSS: {human_bytes(tr.peak_rss)}\n"
                  f"ran for about {ran:.0f}s\n{ended}\n" + detail)
        tags = ["process", sub, name] + ([how.signal_name] if how and how.signal_name else [])
        return self.ctx.event(
            self.name, "system.process", sub, summary, detail=detail, severity=severity,
            tags=tags, peak_cpu_percent=round(tr.peak_cpu, 1), peak_rss_bytes=tr.peak_rss,
            **extra, **self._common(s))
