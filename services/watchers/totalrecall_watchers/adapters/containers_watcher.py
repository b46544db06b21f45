"""Containers watcher: podman and docker container lifecycle, health and disk use.

What an agent asked "why did my container die?" or "which container was OOM-killed?" should
find (category `system.container`):

* **Lifecycle**, followed as it happens: `<engine> events` (JSON, one event per line) runs as a
  long-running subprocess per engine, like `journalctl -f` for the journal watcher. Of its events
  `start`, `stop`, `kill`, `die`/`died`, `oom` (docker) and `health_status` are used:

  - `start` (info);
  - `stop` (info): the container was stopped or killed on request (`podman stop`, `docker
    stop`/`kill`), with its exit code; the engine's `stop`/`kill` and the `die` that follows
    are one event;
  - `exit` (info): the main process ended by itself with exit code 0;
  - `die` (error): it ended by itself with a non-zero exit code (a signal: 128 + n, named);
  - `oom` (error): it was killed by the kernel's OOM killer. docker says so (an `oom` event,
    then `die`: one event); podman does not, so a container dying with 137 (SIGKILL) is looked
    up: `State.OOMKilled` of `<engine> container inspect` and, since conmon does not always
    notice, the kernel log (`/dev/kmsg`: an `oom-kill:` record naming the container's cgroup);
  - `health` (warning when unhealthy, info when healthy again): transitions only (podman
    reports every check run); the first `healthy` of a container seen running is not news.

  The same thing of the same container (name, subcategory, exit code / health) is reported once
  per `dedup_window_s` (a crash loop is one event, the next after the window says how many were
  not reported). The first follower starts from the moment the watcher did (`--since`: nothing
  before its subscription is missed); one that exits is restarted by the runner (with backoff)
  from the last event it saw (the events replayed are recognised and skipped). Event ids
  derive from the engine's own event (container id, action, time): a replay is idempotent.

* **Disk use**, every `interval_s` (10 min): `<engine> system df --format '{{json .}}'` (images,
  containers, local volumes, build cache: size and reclaimable bytes). An event only when the
  total or the reclaimable bytes cross their threshold (once per crossing, re-armed below
  threshold × `rearm_factor`), or when one kind's size changed by `disk_change_fraction` and at
  least `disk_min_change_gb` since the last report; the summary says what could be reclaimed and
  with which command. It advises; it never deletes anything.

Unavailable when no engine of `engines` has a CLI that answers `version` (the reasons are in
`/health`). A `docker` that answers as podman (podman-docker, or podman's socket) is not
followed a second time.

This module runs the engines' CLIs (`adapters/containers.py`) and reads the kernel log; what an
engine event, a `system df` or an inspect means, and what is news, is decided in
`core/containers_*.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent

from ..core.base import Emit, EventContext, Watcher
from ..core.containers_disk import DiskRow, DiskState, disk_check, parse_df, parse_size
from ..core.containers_events import (
    CATEGORY,
    ENGINES,
    LIFECYCLE_KINDS,
    MAX_KEYS,
    EngineEvent,
    OomEvidence,
    format_since,
    kernel_memory_limit,
    parse_event,
    parse_inspect,
    parse_time_ns,
)
from ..core.containers_lifecycle import ContainerLifecycle
from .containers import Engine, KernelLog, probe_engine, spawn_follower
from .processes import end_process, run_command
from .tasks import run_together

if TYPE_CHECKING:
    from ..settings import ContainersSettings

#: Re-exported: what other modules and tests know this watcher's parts by.
__all__ = ["CATEGORY", "ENGINES", "LIFECYCLE_KINDS", "ContainerLifecycle", "ContainersWatcher",
           "DiskRow", "EngineEvent", "KernelLog", "OomEvidence", "format_since", "parse_df",
           "parse_event", "parse_size", "parse_time_ns"]

log = logging.getLogger(__name__)


class ContainersWatcher(Watcher):
    name = "containers"

    def __init__(self, ctx: EventContext, settings: ContainersSettings,
                 kernel_log: KernelLog | None = None) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.engines: list[Engine] = []
        self.kernel_log = kernel_log if kernel_log is not None else (
            KernelLog(settings.kernel_log) if settings.kernel_log else None)
        self.kernel_log_reason: str | None = None
        self.lifecycle = ContainerLifecycle(
            ctx, source=self.name, kinds=settings.events, dedup_window_s=settings.dedup_window_s,
            oom_wait_s=settings.oom_wait_s, label_keys=settings.labels)
        self.disk_state: dict[str, DiskState] = {}
        self._since: dict[str, int] = {}
        self._started_ns: dict[str, int] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._followed: set[str] = set()
        self._base_note = ""
        self.events_seen = 0
        self.parse_errors = 0
        self.replayed = 0
        self.restarts = 0
        self.oom_probes = 0
        self.disk_polls = 0
        self.disk_errors = 0
        self.disk_error: str | None = None

    def stats(self) -> dict[str, int]:
        return {"engines": len(self.engines), "events_seen": self.events_seen,
                "deduplicated": self.lifecycle.deduplicated, "parse_errors": self.parse_errors,
                "replayed": self.replayed, "restarts": self.restarts,
                "oom_probes": self.oom_probes, "disk_polls": self.disk_polls,
                "disk_errors": self.disk_errors}

    def _cli(self, engine: str) -> str:
        return self.settings.cli.get(engine) or engine

    # --- availability -------------------------------------------------------------------------
    def check_available(self) -> str | None:
        found: list[Engine] = []
        absent: list[str] = []
        outputs: dict[str, str] = {}
        for engine in dict.fromkeys(self.settings.engines):
            eng, reason, outputs[engine] = probe_engine(engine, self._cli(engine),
                                                        self.settings.command_timeout_s)
            if eng is None:
                absent.append(f"{engine} ({reason})")
            else:
                found.append(eng)
        names = {e.name for e in found}
        if {"docker", "podman"} <= names and "podman" in outputs["docker"].lower():
            found = [e for e in found if e.name != "docker"]
            absent.append("docker (answers as podman: podman-docker or podman's socket; "
                          "followed once, as podman)")
        self.engines = found
        if not found:
            return "no container engine: " + "; ".join(absent) if absent \
                else "no container engine configured (engines is empty)"
        note = "engines: " + ", ".join(f"{e.name} {e.version}".strip() for e in found)
        if absent:
            note += "; absent: " + "; ".join(absent)
        oom = [f"{e.name} inspect" for e in found]
        if self.kernel_log is not None:
            self.kernel_log_reason = self.kernel_log.check()
            if self.kernel_log_reason is None:
                oom.append(f"kernel log ({self.kernel_log.path})")
            else:
                note += f"; kernel log unreadable ({self.kernel_log_reason})"
        note += "; OOM kills from: " + ", ".join(oom)
        if not self.settings.disk:
            note += "; disk use: off"
        self._base_note = self.note = note
        return None

    # --- running ------------------------------------------------------------------------------
    async def run(self, emit: Emit, stop: asyncio.Event) -> None:
        started = int(self.ctx.clock.now().timestamp() * 10**9)
        for e in self.engines:
            self._started_ns.setdefault(e.name, started)
        jobs = [asyncio.create_task(self._follow(e, emit, stop), name=f"containers-{e.name}")
                for e in self.engines]
        if self.settings.disk:
            jobs.append(asyncio.create_task(self._disk_loop(emit, stop)))
        await run_together(jobs)

    def events_command(self, engine: Engine) -> list[str]:
        fmt = "json" if engine.name == "podman" else "{{json .}}"
        cmd = [engine.cli, "events", "--format", fmt, "--filter", "type=container"]
        # Before any event: the moment the watcher started following, so that nothing between
        # "running" and the engine's subscription is missed (the first seconds of a container).
        since = self._since.get(engine.name, self._started_ns.get(engine.name))
        if since is not None:
            cmd += ["--since", format_since(since)]
        return cmd

    async def _follow(self, engine: Engine, emit: Emit, stop: asyncio.Event) -> None:
        cmd = self.events_command(engine)
        if engine.name in self._followed:
            self.restarts += 1
        self._followed.add(engine.name)
        proc = await spawn_follower(cmd)
        assert proc.stdout is not None and proc.stderr is not None
        stop_task = asyncio.create_task(stop.wait())
        read: asyncio.Task[bytes] | None = None
        clock = self.ctx.clock
        try:
            while True:
                if read is None:
                    read = asyncio.create_task(proc.stdout.readline())
                due = self.lifecycle.next_due()
                timeout = None if due is None else max(0.0, due - clock.monotonic())
                done, _ = await asyncio.wait({read, stop_task}, timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                if stop_task in done:
                    return
                for event in self.lifecycle.due(clock.monotonic()):
                    await emit(event)
                if read not in done:
                    continue
                line, read = read.result(), None
                if not line:
                    break
                for event in await self.handle_line(engine.name, line):
                    await emit(event)
            err = (await proc.stderr.read(2000)).decode("utf-8", "replace").strip()
            rc = await proc.wait()
            raise RuntimeError(f"`{' '.join(cmd[:2])}` exited with {rc}: {err[:300]}")
        finally:
            stop_task.cancel()
            if read is not None:
                read.cancel()
            await end_process(proc)

    async def handle_line(self, engine: str, line: str | bytes) -> list[MemoryEvent]:
        """One line of an engine's events → the events to emit (the OOM lookup included)."""
        try:
            ev = parse_event(engine, line)
        except ValueError:
            self.parse_errors += 1
            return []
        if ev is None:
            return []
        self.events_seen += 1
        if ev.time_ns is not None:
            if ev.key in self._seen:
                self.replayed += 1  # replayed by `--since` after a restart
                return []
            self._seen[ev.key] = None
            while len(self._seen) > MAX_KEYS:
                self._seen.popitem(last=False)
            self._since[engine] = max(self._since.get(engine, 0), ev.time_ns)
        now = self.ctx.clock.monotonic()
        oom: OomEvidence | None = None
        if self.lifecycle.needs_oom_probe(ev, now):
            oom = await self.probe_oom(ev, now)
        return self.lifecycle.feed(ev, self.ctx.clock.monotonic(), oom)

    async def probe_oom(self, ev: EngineEvent, now: float) -> OomEvidence:
        """Was this death by SIGKILL the OOM killer's? The engine's inspect, then the kernel."""
        self.oom_probes += 1
        checked: list[str] = []
        limit: int | None = None
        engine = next((e for e in self.engines if e.name == ev.engine), None)
        cli = engine.cli if engine else self._cli(ev.engine)
        rc, out, _ = await run_command([cli, "container", "inspect", ev.id], timeout=10.0)
        if rc == 0:
            try:
                oom_killed, limit = parse_inspect(out)
            except (ValueError, AttributeError, IndexError, KeyError, TypeError):
                pass
            else:
                checked.append(f"{ev.engine} inspect")
                if oom_killed:
                    return OomEvidence(True, f"{ev.engine} inspect (State.OOMKilled)", limit,
                                       checked=tuple(checked))
        if self.kernel_log is not None and self.kernel_log_reason is None:
            c = self.lifecycle.containers.get((ev.engine, ev.id))
            lookback = 600.0
            if c is not None and c.started_at is not None:
                lookback = min(lookback, now - c.started_at + 30.0)
            try:
                lines = await asyncio.to_thread(self.kernel_log.find_oom_kill, ev.id, lookback)
            except OSError as exc:
                log.warning("containers: reading the kernel log failed: %r", exc)
                lines = ()
            else:
                checked.append("the kernel log")
            if lines:
                if limit is None:
                    limit = kernel_memory_limit(lines)
                return OomEvidence(True, "kernel log (oom-kill record of its cgroup)", limit,
                                   kernel_lines=lines, checked=tuple(checked))
        return OomEvidence(False, None, limit, checked=tuple(checked))

    # --- disk use -----------------------------------------------------------------------------
    async def _disk_loop(self, emit: Emit, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for event in await self.poll_disk():
                await emit(event)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval_s)

    async def poll_disk(self) -> list[MemoryEvent]:
        events: list[MemoryEvent] = []
        errors: list[str] = []
        for engine in self.engines:
            cmd = [engine.cli, "system", "df", "--format", "{{json .}}"]
            rc, out, err = await run_command(cmd, self.settings.command_timeout_s)
            try:
                if rc != 0:
                    raise RuntimeError(f"`{engine.name} system df` failed ({rc}): "
                                       f"{err.strip()[:200]}")
                rows = parse_df(out)
            except (RuntimeError, ValueError) as exc:
                self.disk_errors += 1
                errors.append(f"{engine.name}: {exc}"[:300])
                log.warning("containers: disk use of %s: %s", engine.name, exc)
                continue
            self.disk_polls += 1
            event = self.disk_check(engine.name, rows)
            if event is not None:
                events.append(event)
        self.disk_error = "; ".join(errors) or None
        self.note = self._base_note + (f"; last disk-use error: {self.disk_error}"
                                       if self.disk_error else "")
        return events

    def disk_check(self, engine: str, rows: list[DiskRow]) -> MemoryEvent | None:
        """One engine's `system df` rows → an event when a threshold is crossed or a kind's
        size changed enough since the last report, else None."""
        st = self.disk_state.setdefault(engine, DiskState())
        return disk_check(self.ctx, self.name, self.settings, st, engine, rows)
