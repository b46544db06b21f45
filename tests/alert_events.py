"""Events for the alert tests, made by the watchers' own code (their real classes and parsers,
fed by fake sources and a fake clock): the shapes, subcategories and metadata the rules read are
the ones the watchers really emit. Shared by the unit, integration and e2e alert tests."""

from __future__ import annotations

import json
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from totalrecall_schema import MemoryEvent
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.journal import JournalParser
from totalrecall_watchers.core.process import ProcessThresholds, ProcessWatcher, ProcSample
from totalrecall_watchers.core.storage import StorageWatcher, Usage
from totalrecall_watchers.core.systemd import ServicesWatcher, TimerState, TimersWatcher, UnitState
from totalrecall_watchers.settings import StorageSettings

GiB = 1024**3


def _ctx(namespace: str, at: datetime) -> tuple[EventContext, FakeClock]:
    clock = FakeClock(wall=at)
    return EventContext(namespace=namespace, hostname="box", clock=clock), clock


def _at(clock: FakeClock, when: datetime) -> None:
    clock.advance((when - clock.now()).total_seconds())


# --- storage watcher ---------------------------------------------------------------------------
@dataclass
class _Disk:
    mount: str
    pct: float = 50.0

    def usage(self) -> list[Usage]:
        total = 100 * GiB
        used = int(total * self.pct / 100)
        return [Usage(self.mount, "/dev/vdb", "ext4", total, used, total - used, self.pct,
                      1000, 900)]


def storage_reports(mount: str, readings: Sequence[tuple[datetime, float]],
                    namespace: str = "default") -> list[MemoryEvent]:
    """The storage watcher polling a filesystem at each (time, percent used); the first poll
    (at 50 %) is its baseline."""
    ctx, clock = _ctx(namespace, readings[0][0] - timedelta(minutes=1))
    disk = _Disk(mount)
    watcher = StorageWatcher(ctx, StorageSettings(include_partitions=False), source=disk)
    watcher.poll()
    out: list[MemoryEvent] = []
    for when, pct in readings:
        _at(clock, when)
        disk.pct = pct
        out += watcher.poll()
    return out


def storage_unmount(mount: str, when: datetime, namespace: str = "default") -> list[MemoryEvent]:
    """The storage watcher seeing `mount` (mounted at its first poll) gone at `when`."""
    ctx, clock = _ctx(namespace, when - timedelta(minutes=1))
    disk = _Disk(mount)
    mounted = [True]

    class Source:
        def usage(self) -> list[Usage]:
            return disk.usage() if mounted[0] else []

    watcher = StorageWatcher(ctx, StorageSettings(include_partitions=False), source=Source())
    watcher.poll()
    _at(clock, when)
    mounted[0] = False
    return watcher.poll()


# --- timers watcher (systemctl list-timers) ---------------------------------------------------
class _Timers:
    def __init__(self, timer: str, service: str) -> None:
        self.timer, self.service = timer, service
        self.last: str | None = None
        self.outcome = "success"

    def timers(self) -> dict[str, TimerState]:
        return {self.timer: TimerState(self.timer, self.service, self.last, None)}

    def result(self, unit: str) -> str:
        return self.outcome


def timer_runs(runs: Sequence[tuple[datetime, str]], timer: str = "backup.timer",
               service: str = "backup.service", namespace: str = "default") -> list[MemoryEvent]:
    """The timers watcher seeing `timer` run at each time with systemd's Result (`success`,
    `exit-code`, …)."""
    ctx, clock = _ctx(namespace, runs[0][0] - timedelta(minutes=1))
    source = _Timers(timer, service)
    watcher = TimersWatcher(ctx, source=source)
    watcher.poll()
    out: list[MemoryEvent] = []
    for when, result in runs:
        _at(clock, when)
        source.last, source.outcome = f"{when:%a %Y-%m-%d %H:%M:%S} UTC", result
        out += watcher.poll()
    return out


# --- journal watcher ---------------------------------------------------------------------------
def journal_lines(entries: Sequence[tuple[datetime, dict[str, object]]],
                  namespace: str = "default") -> list[MemoryEvent]:
    """`journalctl -o json` entries through the journal watcher's parser."""
    ctx, clock = _ctx(namespace, entries[0][0])
    parser = JournalParser(ctx)
    out: list[MemoryEvent] = []
    for when, entry in entries:
        _at(clock, when)
        ev = parser.parse(json.dumps(entry))
        if ev is not None:
            out.append(ev)
    return out


def unit_failed_entry(unit: str) -> dict[str, object]:
    return {"MESSAGE": f"{unit}: Failed with result 'exit-code'.", "PRIORITY": "3",
            "SYSLOG_IDENTIFIER": "systemd", "UNIT": unit, "_PID": "1", "_TRANSPORT": "journal"}


def oom_entry(pid: int, name: str) -> dict[str, object]:
    return {"MESSAGE": f"Out of memory: Killed process {pid} ({name}) total-vm:8123456kB, "
                       f"anon-rss:4023456kB, file-rss:0kB", "PRIORITY": "3",
            "SYSLOG_IDENTIFIER": "kernel", "_TRANSPORT": "kernel"}


def coredump_entry(pid: int, name: str) -> dict[str, object]:
    return {"MESSAGE": f"Process {pid} ({name}) of user 1000 dumped core.\n\nStack trace of "
                       f"thread {pid}:\n#0  0x00007f main ({name} + 0x1234)", "PRIORITY": "2",
            "SYSLOG_IDENTIFIER": "systemd-coredump", "_PID": "4242", "_TRANSPORT": "journal",
            "_SYSTEMD_UNIT": f"systemd-coredump@0-{pid}.service"}


# --- process watcher ---------------------------------------------------------------------------
class _Procs:
    def __init__(self) -> None:
        self.procs: dict[int, ProcSample] = {}

    def sample(self) -> list[ProcSample]:
        return list(self.procs.values())


class _Exits:
    def __init__(self) -> None:
        self.status: dict[int, int] = {}

    def start(self) -> bool:
        return True

    def lookup(self, pid: int, *, not_before: float = 0.0, wait_s: float = 0.2) -> int | None:
        return self.status.get(pid)

    def close(self) -> None:
        pass


def process_crashes(name: str, times: Sequence[datetime], sig: int = signal.SIGSEGV,
                    namespace: str = "default") -> list[MemoryEvent]:
    """A process `name` going hot (CPU) and then killed by `sig`, once at each time: the
    process watcher's `crash` events (wait status from the kernel's process connector)."""
    ctx, clock = _ctx(namespace, times[0] - timedelta(minutes=5))
    procs, exits = _Procs(), _Exits()
    watcher = ProcessWatcher(ctx, interval_s=30, thresholds=ProcessThresholds(cpu_percent=50),
                             source=procs, exits=exits)
    watcher.poll()
    out: list[MemoryEvent] = []
    for i, when in enumerate(times):
        pid = 5000 + i
        _at(clock, when - timedelta(minutes=1))
        procs.procs[pid] = ProcSample(pid, clock.now().timestamp(), name, [name, "--serve"],
                                      "alice", 0.0, 300 * 1024**2, 2.0)
        watcher.poll()
        _at(clock, when - timedelta(seconds=30))
        p = procs.procs[pid]
        procs.procs[pid] = ProcSample(p.pid, p.create_time, p.name, p.cmdline, p.username,
                                      p.cpu_time + 29.0, p.rss, p.mem_percent)
        out += watcher.poll()  # high_cpu: now tracked
        _at(clock, when)
        del procs.procs[pid]
        exits.status[pid] = int(sig)  # waitpid form: the signal in the low bits
        out += watcher.poll()
    return [e for e in out if e.subcategory != "high_cpu"]


# --- services watcher (systemctl list-units) --------------------------------------------------
class _Units:
    def __init__(self) -> None:
        self.state: dict[str, UnitState] = {}

    def units(self) -> dict[str, UnitState]:
        return dict(self.state)


def unit_states(unit: str, changes: Sequence[tuple[datetime, str, str]],
                namespace: str = "default") -> list[MemoryEvent]:
    """The services watcher seeing `unit` change to each (active, sub) state at each time; it
    starts out inactive (dead)."""
    ctx, clock = _ctx(namespace, changes[0][0] - timedelta(minutes=1))
    source = _Units()
    source.state[unit] = UnitState("loaded", "inactive", "dead", f"{unit} description")
    watcher = ServicesWatcher(ctx, source=source)
    watcher.poll()
    out: list[MemoryEvent] = []
    for when, active, sub in changes:
        _at(clock, when)
        source.state[unit] = UnitState("loaded", active, sub, f"{unit} description")
        out += watcher.poll()
    return out


def as_ingest(ev: MemoryEvent, namespace: str) -> dict[str, object]:
    """A watcher's event as `POST /memory/ingest` takes it (same id, time, source, metadata)."""
    return {"id": ev.id, "timestamp": ev.timestamp.isoformat(), "namespace": namespace,
            "category": ev.category, "subcategory": ev.subcategory, "actor": ev.actor,
            "source": ev.source, "summary": ev.summary, "detail": ev.detail,
            "metadata": ev.metadata.model_dump(mode="json", exclude_none=True)}
