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
  not reported). An engine's follower that exits is restarted by the runner (with backoff) from
  the last event it saw (`--since`; the events replayed are recognised and skipped). Event ids
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
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import signal as _signal
import subprocess
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent, Severity

from .base import Emit, EventContext, Watcher
from .scrub import scrub_extra

if TYPE_CHECKING:
    from ..settings import ContainersSettings

log = logging.getLogger(__name__)

CATEGORY = "system.container"
ENGINES = ("podman", "docker")
#: The lifecycle subcategories (`events` of the settings chooses among them).
LIFECYCLE_KINDS = ("start", "stop", "exit", "die", "oom", "health")
OOM_EXIT_CODE = 137  # 128 + SIGKILL: what the OOM killer leaves
#: Signals of a `kill` event that end a container (its `die` is then a stop on request).
STOP_SIGNALS = {int(_signal.SIGTERM), int(_signal.SIGKILL), int(_signal.SIGINT),
                int(_signal.SIGQUIT)}
MAX_KEYS = 5000
MAX_VALUE_CHARS = 128
GB = 1_000_000_000  # the engines' `system df` counts in decimal units
#: `system df` rows by their `Type`, and what reclaims each (per engine).
DF_KINDS = {"images": "images", "containers": "containers", "local volumes": "volumes",
            "volumes": "volumes", "build cache": "build_cache"}
DF_ORDER = ("images", "containers", "volumes", "build_cache")
DF_NAMES = {"images": "images", "containers": "containers", "volumes": "volumes",
            "build_cache": "build cache"}
DF_WORDS = {"images": "images", "containers": "stopped containers", "volumes": "unused volumes",
            "build_cache": "build cache"}
PRUNE = {"images": "{cli} image prune -a", "containers": "{cli} container prune",
         "volumes": "{cli} volume prune", "build_cache": "{cli} builder prune"}


# --- the engines' events ----------------------------------------------------------------------
@dataclass(frozen=True)
class EngineEvent:
    """One container event of either engine, normalised."""

    engine: str
    #: start, stop, kill, die, oom, health, remove; any other action as the engine names it.
    action: str
    id: str
    name: str = ""
    image: str = ""
    time_ns: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    health: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    pod_id: str | None = None
    raw_action: str = ""

    @property
    def short_id(self) -> str:
        return self.id[:12]

    @property
    def at(self) -> datetime | None:
        if self.time_ns is None:
            return None
        sec, ns = divmod(self.time_ns, 10**9)
        return datetime.fromtimestamp(sec, UTC).replace(microsecond=ns // 1000)

    @property
    def key(self) -> str:
        """What makes this event unique (and a replayed copy recognisable)."""
        return f"{self.engine}\x00{self.id}\x00{self.raw_action}\x00{self.time_ns}"


_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)?$")


def parse_time_ns(value: Any) -> int | None:
    """An event time (RFC 3339 with nanoseconds, or Unix seconds / nanoseconds) → Unix ns."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        v = int(value)
        return v if v > 10**15 else v * 10**9
    m = _RFC3339.match(str(value).strip())
    if not m:
        return None
    base, frac, tz = m.group(1), m.group(2) or "", m.group(3) or "Z"
    try:
        dt = datetime.fromisoformat(base + ("+00:00" if tz == "Z" else tz))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp()) * 10**9 + int((frac + "000000000")[:9])


def format_since(time_ns: int) -> str:
    """RFC 3339 with nanoseconds (UTC), as both engines' `--since` take it."""
    dt = datetime.fromtimestamp(time_ns // 10**9, UTC)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{time_ns % 10**9:09d}Z"


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(str(v).strip())
    except ValueError:
        return None


def _signal_number(v: Any) -> int | None:
    n = _int(v)
    if n is not None:
        return n
    name = str(v or "").strip().upper()
    if not name:
        return None
    with contextlib.suppress(KeyError):
        return int(_signal.Signals[name if name.startswith("SIG") else "SIG" + name])
    return None


def signal_name(n: int) -> str:
    try:
        return _signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


_PODMAN_ACTIONS = {"died": "die", "health_status": "health"}
_DOCKER_ACTIONS = {"destroy": "remove"}
#: docker's attributes that are not labels.
_DOCKER_NON_LABELS = {"name", "image", "exitCode", "signal", "execDuration", "container",
                      "health_status"}


def parse_event(engine: str, line: str | bytes) -> EngineEvent | None:
    """One line of `podman events --format json` or `docker events --format '{{json .}}'` →
    an event of a container, or None (another type). Raises ValueError when it is not an
    event at all."""
    raw = json.loads(line)
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    if "Actor" in raw or "Action" in raw:  # docker (and podman's Docker-compatible API)
        if str(raw.get("Type") or raw.get("type") or "container") != "container":
            return None
        actor: dict[str, Any] = raw["Actor"] if isinstance(raw.get("Actor"), dict) else {}
        attrs = {str(k): str(v) for k, v in (actor.get("Attributes") or {}).items()}
        raw_action = str(raw.get("Action") or raw.get("status") or "")
        action, health = raw_action, None
        if raw_action.startswith("health_status"):
            action = "health"
            health = raw_action.partition(":")[2].strip() or attrs.get("health_status") or None
        action = _DOCKER_ACTIONS.get(action, action)
        time_ns = parse_time_ns(raw.get("timeNano")) or parse_time_ns(raw.get("time"))
        return EngineEvent(
            engine=engine, action=action, raw_action=raw_action,
            id=str(actor.get("ID") or raw.get("id") or ""), name=attrs.get("name", ""),
            image=attrs.get("image") or str(raw.get("from") or ""), time_ns=time_ns,
            exit_code=_int(attrs.get("exitCode")), signal=_signal_number(attrs.get("signal")),
            health=health.lower() if health else None,
            labels={k: v for k, v in attrs.items() if k not in _DOCKER_NON_LABELS})
    if "Status" not in raw:
        raise ValueError("neither a podman nor a docker event")
    if str(raw.get("Type") or "") != "container":
        return None
    raw_action = str(raw.get("Status") or "")
    health = raw.get("health_status") or raw.get("HealthStatus")
    labels: dict[str, Any] = raw["Attributes"] if isinstance(raw.get("Attributes"), dict) \
        else {}
    time_ns = parse_time_ns(raw.get("Time")) or parse_time_ns(raw.get("timeNano")) \
        or parse_time_ns(raw.get("time"))
    return EngineEvent(
        engine=engine, action=_PODMAN_ACTIONS.get(raw_action, raw_action), raw_action=raw_action,
        id=str(raw.get("ID") or ""), name=str(raw.get("Name") or ""),
        image=str(raw.get("Image") or ""), time_ns=time_ns,
        exit_code=_int(raw.get("ContainerExitCode")),
        health=str(health).lower() if health else None,
        labels={str(k): str(v) for k, v in labels.items()},
        pod_id=str(raw.get("PodID")) if raw.get("PodID") else None)


# --- what made a container die: the OOM evidence ----------------------------------------------
@dataclass(frozen=True)
class OomEvidence:
    oom_killed: bool
    #: What said so: "docker oom event", "podman inspect (State.OOMKilled)", "kernel log".
    via: str | None = None
    memory_limit: int | None = None
    #: The kernel's own lines: the `oom-kill:` record and the `Killed process` one after it.
    kernel_lines: tuple[str, ...] = ()
    #: What was looked at (for the detail): "podman inspect", "kernel log (/dev/kmsg)".
    checked: tuple[str, ...] = ()


class KernelLog:
    """The kernel's log ring buffer (`/dev/kmsg`, readable by root or with CAP_SYSLOG): finds
    the OOM kill of a container by its id (the `oom-kill:` record names its memory cgroup,
    `libpod-<id>`, `docker-<id>.scope`, `/docker/<id>`)."""

    def __init__(self, path: str = "/dev/kmsg",
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.monotonic = monotonic

    def check(self) -> str | None:
        """None when readable, else why not."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            return f"{self.path}: {exc.strerror or exc}"
        os.close(fd)
        return None

    def records(self) -> Iterator[tuple[float, str]]:
        """(seconds since boot, message) of every record in the buffer. /dev/kmsg gives one
        record per read and EAGAIN at the end; a plain file (tests) is read as lines."""
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        buf = b""
        try:
            while True:
                try:
                    chunk = os.read(fd, 16384)
                except BlockingIOError:
                    break
                except BrokenPipeError:  # a record was overwritten while reading: go on
                    continue
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    rec = _kmsg_record(line)
                    if rec is not None:
                        yield rec
            rec = _kmsg_record(buf)
            if rec is not None:
                yield rec
        finally:
            os.close(fd)

    def find_oom_kill(self, container_id: str, lookback_s: float) -> tuple[str, ...]:
        """The kernel's lines about an OOM kill in this container's cgroup within the last
        `lookback_s` (empty: none): the cgroup's `memory: usage …, limit …` when the kill was
        the cgroup's, the `oom-kill:` record, the `Killed process` one."""
        if len(container_id) < 12:
            return ()
        since = self.monotonic() - lookback_s
        found: list[str] = []
        usage: str | None = None
        for ts, msg in self.records():
            if found:
                if "Killed process" in msg:
                    found.append(msg)
                    break
                continue
            if "invoked oom-killer" in msg:
                usage = None  # a new OOM report begins
            elif msg.startswith("memory: usage"):
                usage = msg
            elif ts >= since and msg.startswith("oom-kill:") and container_id in msg:
                found += [usage, msg] if usage else [msg]
        return tuple(found)


def _kmsg_record(line: bytes) -> tuple[float, str] | None:
    """`pri,seq,usec,flags[,…];message` (continuation lines start with a space: skipped)."""
    if not line or line[:1] == b" ":
        return None
    head, sep, msg = line.partition(b";")
    if not sep:
        return None
    fields = head.split(b",")
    try:
        ts = int(fields[2]) / 1e6
    except (IndexError, ValueError):
        return None
    return ts, msg.decode("utf-8", "replace").strip()


_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")
_CGROUP_LIMIT = re.compile(r"^memory: usage (\d+)kB, limit (\d+)kB")


# --- the lifecycle state ------------------------------------------------------------------------
@dataclass
class _Container:
    engine: str
    id: str
    name: str = ""
    image: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    pod_id: str | None = None
    started_at: float | None = None
    #: A stop or kill asked for (monotonic time, how): the `die` that follows is that stop.
    stop_at: float | None = None
    stop_how: str | None = None
    stop_event: EngineEvent | None = None
    #: docker's `oom` event waiting for the `die` that usually follows.
    oom_at: float | None = None
    oom_event: EngineEvent | None = None
    #: When its death was reported (docker's `stop` after `die` is then swallowed).
    ended_at: float | None = None
    health: str | None = None


class ContainerLifecycle:
    """Engine events → `system.container` events: pairs stop/kill/oom with the `die` that
    follows, keeps health transitions only, deduplicates repeats. Pure but for the clock."""

    def __init__(self, ctx: EventContext, *, source: str = "containers",
                 kinds: Sequence[str] = LIFECYCLE_KINDS,
                 dedup_window_s: float = 300.0, oom_wait_s: float = 5.0,
                 stop_window_s: float = 120.0, label_keys: Sequence[str] = ()) -> None:
        self.ctx = ctx
        self.source = source
        self.kinds = set(kinds)
        self.window = dedup_window_s
        self.oom_wait_s = oom_wait_s
        self.stop_window_s = stop_window_s
        self.label_keys = tuple(label_keys)
        self.containers: OrderedDict[tuple[str, str], _Container] = OrderedDict()
        self._last: OrderedDict[tuple[Any, ...], tuple[float, int]] = OrderedDict()
        self.deduplicated = 0
        self.ignored = 0

    # --- state --------------------------------------------------------------------------------
    def _container(self, ev: EngineEvent) -> _Container:
        key = (ev.engine, ev.id)
        c = self.containers.get(key)
        if c is None:
            c = self.containers[key] = _Container(ev.engine, ev.id)
            while len(self.containers) > MAX_KEYS:
                self.containers.popitem(last=False)
        self.containers.move_to_end(key)
        c.name = ev.name or c.name
        c.image = ev.image or c.image
        if ev.labels:
            c.labels = dict(ev.labels)
        c.pod_id = ev.pod_id or c.pod_id
        return c

    def stopping(self, ev: EngineEvent, now: float) -> bool:
        """A stop or kill of this container was asked for recently (its `die` is that stop)."""
        c = self.containers.get((ev.engine, ev.id))
        return c is not None and c.stop_at is not None and now - c.stop_at <= self.stop_window_s

    def needs_oom_probe(self, ev: EngineEvent, now: float) -> bool:
        """A death by SIGKILL nobody asked for and no engine `oom` event explains: look it up."""
        if ev.action != "die" or ev.exit_code != OOM_EXIT_CODE or "oom" not in self.kinds:
            return False
        c = self.containers.get((ev.engine, ev.id))
        return not self.stopping(ev, now) and not (c is not None and c.oom_at is not None)

    def next_due(self) -> float | None:
        """When `due` has something to report (a docker `oom` or a stop no `die` followed)."""
        times = [c.oom_at + self.oom_wait_s for c in self.containers.values()
                 if c.oom_at is not None]
        times += [c.stop_at + self.stop_window_s for c in self.containers.values()
                  if c.stop_at is not None and c.stop_event is not None]
        return min(times) if times else None

    def due(self, now: float) -> list[MemoryEvent]:
        out: list[MemoryEvent] = []
        for c in list(self.containers.values()):
            if c.oom_at is not None and c.oom_event is not None \
                    and now >= c.oom_at + self.oom_wait_s:
                ev = c.oom_event
                c.oom_at, c.oom_event = None, None
                out += self._emit("oom", c, ev, now, oom=OomEvidence(True, f"{c.engine} oom event"),
                                  died=False)
            if c.stop_at is not None and c.stop_event is not None \
                    and now >= c.stop_at + self.stop_window_s:
                ev = c.stop_event
                c.stop_at, c.stop_event, c.stop_how = None, None, None
                out += self._emit("stop", c, ev, now, how=f"{c.engine} stop")
        return out

    # --- feeding ------------------------------------------------------------------------------
    def feed(self, ev: EngineEvent, now: float,
             oom: OomEvidence | None = None) -> list[MemoryEvent]:
        if not ev.id:
            self.ignored += 1
            return []
        if ev.action not in ("start", "stop", "kill", "die", "oom", "health", "remove"):
            self.ignored += 1
            return []
        c = self._container(ev)
        if ev.action == "remove":
            self.containers.pop((ev.engine, ev.id), None)
            return []
        if ev.action == "start":
            c.started_at, c.ended_at = now, None
            c.stop_at = c.stop_how = c.stop_event = None
            c.oom_at = c.oom_event = None
            c.health = None
            return self._emit("start", c, ev, now)
        if ev.action == "kill":
            sig = ev.signal
            if sig is not None and sig not in STOP_SIGNALS:
                return []  # a signal that does not end a container (SIGHUP: reload)
            how = f"{ev.engine} stop or kill" if ev.engine == "docker" else f"{ev.engine} kill"
            c.stop_at = now
            c.stop_how = how + (f", {signal_name(sig)}" if sig else "")
            return []
        if ev.action == "stop":
            if c.ended_at is not None and now - c.ended_at <= self.stop_window_s:
                return []  # docker: `die` came first and was reported as this stop
            c.stop_at = now
            c.stop_how = c.stop_how if c.stop_how and "stop" in c.stop_how \
                else f"{ev.engine} stop"
            c.stop_event = ev  # podman: the `died` follows at once; else reported when due
            return []
        if ev.action == "oom":
            c.oom_at, c.oom_event = now, ev
            return []
        if ev.action == "health":
            return self._health(c, ev, now)
        return self._die(c, ev, now, oom)

    def _die(self, c: _Container, ev: EngineEvent, now: float,
             oom: OomEvidence | None) -> list[MemoryEvent]:
        c.ended_at = now
        c.health = None
        if c.oom_at is not None:
            c.oom_at, c.oom_event = None, None
            merged = OomEvidence(True, f"{c.engine} oom event",
                                 oom.memory_limit if oom else None,
                                 oom.kernel_lines if oom else (), oom.checked if oom else ())
            return self._emit("oom", c, ev, now, oom=merged)
        if oom is not None and oom.oom_killed:
            c.stop_at = c.stop_how = c.stop_event = None
            return self._emit("oom", c, ev, now, oom=oom)
        if c.stop_at is not None and now - c.stop_at <= self.stop_window_s:
            how = c.stop_how or f"{c.engine} stop"
            c.stop_at = c.stop_how = c.stop_event = None
            return self._emit("stop", c, ev, now, how=how)
        c.stop_at = c.stop_how = c.stop_event = None
        if ev.exit_code == 0:
            return self._emit("exit", c, ev, now)
        return self._emit("die", c, ev, now, oom=oom)

    def _health(self, c: _Container, ev: EngineEvent, now: float) -> list[MemoryEvent]:
        status = (ev.health or "").lower()
        prev = c.health
        if status not in ("healthy", "unhealthy"):
            if status:
                c.health = status  # starting, none: remembered, never news
            return []
        c.health = status
        if status == prev:
            return []
        if status == "healthy" and prev is None:
            return []  # the first look at a container running fine
        return self._emit("health", c, ev, now, previous_health=prev)

    # --- events -------------------------------------------------------------------------------
    def _dedup(self, key: tuple[Any, ...], now: float) -> tuple[bool, int]:
        """(report it?, how many like it were not reported since the last one)."""
        last = self._last.get(key)
        if last is not None and now - last[0] < self.window:
            self._last[key] = (last[0], last[1] + 1)
            self.deduplicated += 1
            return False, 0
        self._last[key] = (now, 0)
        self._last.move_to_end(key)
        while len(self._last) > MAX_KEYS:
            self._last.popitem(last=False)
        return True, last[1] if last is not None else 0

    def _emit(self, kind: str, c: _Container, ev: EngineEvent, now: float, *,
              oom: OomEvidence | None = None, how: str | None = None,
              previous_health: str | None = None, died: bool = True) -> list[MemoryEvent]:
        if kind not in self.kinds:
            return []
        who = c.name or c.id[:12]
        detail_key = ev.health if kind == "health" else ev.exit_code
        report, repeats = self._dedup((c.engine, who, kind, detail_key), now)
        if not report:
            return []
        return [self._event(kind, c, ev, oom=oom, how=how, previous_health=previous_health,
                            died=died, repeats=repeats)]

    def _labels(self, c: _Container) -> dict[str, str]:
        return {k: scrub_extra(c.labels[k])[:MAX_VALUE_CHARS] for k in self.label_keys
                if c.labels.get(k)}

    def _event(self, kind: str, c: _Container, ev: EngineEvent, *, oom: OomEvidence | None,
               how: str | None, previous_health: str | None, died: bool,
               repeats: int) -> MemoryEvent:
        name = scrub_extra(c.name or c.id[:12])[:MAX_VALUE_CHARS]
        image = scrub_extra(c.image)[:300]
        labels = self._labels(c)
        project = labels.get("com.docker.compose.project") or labels.get(
            "io.podman.compose.project")
        service = labels.get("com.docker.compose.service")
        who = f"{c.engine} container '{name}'" + (f" (image {image})" if image else "")
        code = ev.exit_code
        extra: dict[str, Any] = {"engine": c.engine, "container_id": c.id[:12],
                                 "container_name": name, "image": image}
        if labels:
            extra["labels"] = labels
        if project:
            extra["compose_project"] = project
        if service:
            extra["compose_service"] = service
        if c.pod_id:
            extra["pod_id"] = c.pod_id[:12]
        lines: list[str] = []
        severity = Severity.INFO
        tags = ["container", c.engine, kind]
        if kind == "start":
            summary = f"{who} started"
        elif kind == "exit":
            summary = f"{who} exited normally (exit code 0)"
            lines.append("The container's main process finished by itself with exit code 0.")
        elif kind == "stop":
            summary = f"{who} was stopped ({how or c.engine + ' stop'})" + (
                f", exit code {code}" if code is not None else "")
            if code is not None and code > 128:
                summary += f" ({signal_name(code - 128)})"
            lines.append(f"Stopped on request: {how or c.engine + ' stop'}; not a crash.")
            extra["stopped_by"] = how or f"{c.engine} stop"
        elif kind == "die":
            severity = Severity.ERROR
            if code is not None and code > 128:
                sig = signal_name(code - 128)
                summary = f"{who} died: killed by {sig} (exit code {code})"
                extra["signal"] = sig
                lines.append(f"The main process was killed by {sig} (exit code {code} = 128 + "
                             f"{code - 128}), and nobody asked the engine to stop it.")
            else:
                summary = f"{who} died with exit code {code if code is not None else 'unknown'}"
                lines.append("The container's main process exited with an error (non-zero exit "
                             "code); its logs say why: "
                             f"`{c.engine} logs {name}`.")
            if oom is not None and oom.checked:
                lines.append("Not killed by the OOM killer as far as "
                             + " and ".join(oom.checked) + " tell.")
            extra["oom_killed"] = False
        elif kind == "oom":
            severity = Severity.ERROR
            limit = oom.memory_limit if oom else None
            if died:
                summary = (f"{who} was killed by the kernel's OOM killer (out of memory)"
                           + (f", exit code {code}" if code is not None else ""))
            else:
                summary = (f"A process in {who} was killed by the kernel's OOM killer (out of "
                           "memory); the container kept running")
            if limit:
                summary += f", memory limit {_si(limit)}"
                extra["memory_limit_bytes"] = limit
            extra["oom_killed"] = True
            if oom is not None and oom.via:
                extra["oom_source"] = oom.via
                lines.append(f"OOM kill reported by: {oom.via}.")
            for kline in oom.kernel_lines if oom else ():
                m = _KILLED.search(kline)
                if m:
                    extra["killed_process"] = scrub_extra(m.group(2))[:64]
                    extra["killed_pid"] = int(m.group(1))
                lines.append(f"kernel: {kline[:600]}")
            lines.append("It ran out of memory: raise its memory limit (--memory) or find what "
                         "grew.")
            tags.append("oom")
        else:  # health
            status = ev.health or "unknown"
            extra["health"] = status
            extra["previous_health"] = previous_health or "unknown"
            if status == "unhealthy":
                severity = Severity.WARNING
                summary = f"{who} became unhealthy (its health check fails)"
            elif previous_health == "unhealthy":
                summary = f"{who} is healthy again (its health check passes)"
            else:
                summary = f"{who} became healthy"
            summary += f"; was {previous_health or 'unknown'}"
            lines.append(f"health: {previous_health or 'unknown'} → {status}")
            tags.append(status)
        if project:
            summary += f" — compose project {project}" + (f", service {service}" if service else "")
        if repeats:
            extra["repeats"] = repeats
            lines.append(f"{repeats} more like it within {self.window:g} s before were not "
                         "reported separately.")
        lines += [f"engine: {c.engine}", f"container: {name} ({c.id[:12]})",
                  f"image: {image or '-'}"]
        if code is not None:
            lines.append(f"exit code: {code}")
        lines += [f"label {k}: {v}" for k, v in labels.items()]
        lines.append(f"host: {self.ctx.hostname}")
        event = self.ctx.event(self.source, CATEGORY, kind, summary, detail="\n".join(lines),
                               severity=severity, exit_code=code if kind != "start" else None,
                               tags=tags, **extra)
        digest = hashlib.sha256(f"{self.ctx.hostname}\x00{ev.key}\x00{kind}".encode()).hexdigest()
        update: dict[str, Any] = {"id": f"ctr-{digest[:40]}"}
        if ev.at is not None:
            update["timestamp"] = ev.at
        return event.model_copy(update=update)


def _si(n: float) -> str:
    """Bytes in decimal units, as `podman/docker system df` shows them (3.2 GB)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


# --- disk use -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DiskRow:
    kind: str  # images, containers, volumes, build_cache
    count: int
    active: int
    size: int
    reclaimable: int


_SIZE = re.compile(r"^\s*([\d.]+)\s*([kKMGTP]?i?B)?")
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "PIB": 2**50}


def parse_size(v: Any) -> int | None:
    """A size as the engines print it: bytes (int) or `2.917GB`, `1.2GB (50%)`, `0B`."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return int(v)
    m = _SIZE.match(str(v))
    if not m:
        return None
    unit = _UNITS.get((m.group(2) or "").upper())
    try:
        return int(float(m.group(1)) * unit) if unit is not None else None
    except ValueError:
        return None


def parse_df(text: str) -> list[DiskRow]:
    """`<engine> system df --format '{{json .}}'` (one object per line) or a JSON array (podman
    ≥ 4.4's `--format json`). podman gives bytes (`Size`, or `RawSize`), docker human sizes."""
    text = text.strip()
    objs: list[Any] = []
    if text.startswith("["):
        objs = json.loads(text)
    else:
        objs = [json.loads(line) for line in text.splitlines() if line.strip()]
    rows: list[DiskRow] = []
    for o in objs:
        if not isinstance(o, dict):
            raise ValueError(f"not a disk-use row: {str(o)[:100]}")
        kind = DF_KINDS.get(str(o.get("Type", "")).strip().lower())
        if kind is None:
            continue
        size = parse_size(o["RawSize"]) if "RawSize" in o else parse_size(o.get("Size"))
        recl = parse_size(o["RawReclaimable"]) if "RawReclaimable" in o \
            else parse_size(o.get("Reclaimable"))
        rows.append(DiskRow(kind, _int(o.get("TotalCount", o.get("Total"))) or 0,
                            _int(o.get("Active")) or 0, size or 0, recl or 0))
    if not rows:
        raise ValueError(f"no disk-use rows in {text[:200]!r}")
    return rows


@dataclass
class _DiskState:
    baseline: dict[str, int] | None = None
    total_alerted: bool = False
    reclaimable_alerted: bool = False


# --- the watcher --------------------------------------------------------------------------------
@dataclass
class _Engine:
    name: str
    cli: str
    version: str = ""


class ContainersWatcher(Watcher):
    name = "containers"

    def __init__(self, ctx: EventContext, settings: ContainersSettings,
                 kernel_log: KernelLog | None = None) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.engines: list[_Engine] = []
        self.kernel_log = kernel_log if kernel_log is not None else (
            KernelLog(settings.kernel_log) if settings.kernel_log else None)
        self.kernel_log_reason: str | None = None
        self.lifecycle = ContainerLifecycle(
            ctx, source=self.name, kinds=settings.events, dedup_window_s=settings.dedup_window_s,
            oom_wait_s=settings.oom_wait_s, label_keys=settings.labels)
        self.disk_state: dict[str, _DiskState] = {}
        self._since: dict[str, int] = {}
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
    def _probe(self, engine: str) -> tuple[_Engine | None, str, str]:
        """(the engine when usable, why not, what its `version` printed)."""
        cli = self._cli(engine)
        path = shutil.which(cli)
        if path is None:
            return None, f"{cli} not found on PATH", ""
        try:
            proc = subprocess.run([path, "version"], capture_output=True, text=True,
                                  timeout=self.settings.command_timeout_s,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"`{engine} version` failed: {exc}"[:300], ""
        out = proc.stdout + proc.stderr
        if proc.returncode != 0:
            err = next((ln.strip() for ln in reversed(proc.stderr.splitlines()) if ln.strip()),
                       f"exit status {proc.returncode}")
            return None, f"`{engine} version` failed: {err}"[:300], out
        m = re.search(r"(?im)^\s*version:\s*(\S+)", proc.stdout)
        return _Engine(engine, path, m.group(1) if m else ""), "", out

    def check_available(self) -> str | None:
        found: list[_Engine] = []
        absent: list[str] = []
        outputs: dict[str, str] = {}
        for engine in dict.fromkeys(self.settings.engines):
            eng, reason, outputs[engine] = self._probe(engine)
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
        jobs = [asyncio.create_task(self._follow(e, emit, stop), name=f"containers-{e.name}")
                for e in self.engines]
        if self.settings.disk:
            jobs.append(asyncio.create_task(self._disk_loop(emit, stop)))
        try:
            done, _ = await asyncio.wait(jobs, return_when=asyncio.FIRST_EXCEPTION)
            for job in done:
                job.result()  # re-raise a failure: the runner retries with backoff
        finally:
            for job in jobs:
                job.cancel()
            for job in jobs:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await job

    def events_command(self, engine: _Engine) -> list[str]:
        fmt = "json" if engine.name == "podman" else "{{json .}}"
        cmd = [engine.cli, "events", "--format", fmt, "--filter", "type=container"]
        since = self._since.get(engine.name)
        if since is not None:
            cmd += ["--since", format_since(since)]
        return cmd

    async def _follow(self, engine: _Engine, emit: Emit, stop: asyncio.Event) -> None:
        cmd = self.events_command(engine)
        if engine.name in self._followed:
            self.restarts += 1
        self._followed.add(engine.name)
        proc = await asyncio.create_subprocess_exec(
            *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL, limit=1 << 20)
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
            await _end(proc)

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
        rc, out, _ = await self._command([cli, "container", "inspect", ev.id], timeout=10.0)
        if rc == 0:
            try:
                data = json.loads(out)
                info = data[0] if isinstance(data, list) and data else data
                state = info.get("State") or {}
                limit = _int((info.get("HostConfig") or {}).get("Memory")) or None
                checked.append(f"{ev.engine} inspect")
                if state.get("OOMKilled") is True:
                    return OomEvidence(True, f"{ev.engine} inspect (State.OOMKilled)", limit,
                                       checked=tuple(checked))
            except (ValueError, AttributeError, IndexError, KeyError, TypeError):
                pass
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
                m = _CGROUP_LIMIT.match(lines[0])
                if limit is None and m and int(m.group(2)) < 2**50:  # not "unlimited"
                    limit = int(m.group(2)) * 1024
                return OomEvidence(True, "kernel log (oom-kill record of its cgroup)", limit,
                                   kernel_lines=lines, checked=tuple(checked))
        return OomEvidence(False, None, limit, checked=tuple(checked))

    async def _command(self, argv: list[str], timeout: float) -> tuple[int, str, str]:
        """Run a short command; (rc, stdout, stderr), rc -1 when it could not run or timed out."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                stdin=asyncio.subprocess.DEVNULL)
        except OSError as exc:
            return -1, "", str(exc)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            await _end(proc)
            return -1, "", f"timed out after {timeout:g} s"
        finally:
            if proc.returncode is None:
                await _end(proc)
        assert proc.returncode is not None
        return (proc.returncode, out.decode("utf-8", "replace"),
                err.decode("utf-8", "replace"))

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
            rc, out, err = await self._command(cmd, self.settings.command_timeout_s)
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
        s = self.settings
        st = self.disk_state.setdefault(engine, _DiskState())
        by_kind: dict[str, DiskRow] = {}
        for r in rows:
            prev = by_kind.get(r.kind)
            by_kind[r.kind] = r if prev is None else DiskRow(
                r.kind, prev.count + r.count, prev.active + r.active, prev.size + r.size,
                prev.reclaimable + r.reclaimable)
        total = sum(r.size for r in by_kind.values())
        reclaimable = sum(r.reclaimable for r in by_kind.values())
        reasons: list[str] = []
        crossed: list[str] = []
        total_thr = s.disk_total_gb * GB
        if total_thr > 0:
            if total >= total_thr and not st.total_alerted:
                st.total_alerted = True
                crossed.append("total")
                reasons.append(f"its storage reached {_si(total)} (threshold {_si(total_thr)})")
            elif total < total_thr * s.rearm_factor:
                st.total_alerted = False
        recl_thr = s.disk_reclaimable_gb * GB
        if recl_thr > 0:
            if reclaimable >= recl_thr and not st.reclaimable_alerted:
                st.reclaimable_alerted = True
                crossed.append("reclaimable")
                reasons.append(f"{_si(reclaimable)} could be reclaimed (threshold "
                               f"{_si(recl_thr)})")
            elif reclaimable < recl_thr * s.rearm_factor:
                st.reclaimable_alerted = False
        sizes = {k: r.size for k, r in by_kind.items()}
        changed: list[str] = []
        if st.baseline is None:
            st.baseline = sizes  # the first look: what later changes are measured against
        elif s.disk_change_fraction > 0:
            for kind in DF_ORDER:
                if kind not in sizes:
                    continue
                before, now = st.baseline.get(kind, 0), sizes[kind]
                delta = now - before
                if abs(delta) >= max(s.disk_change_fraction * before, s.disk_min_change_gb * GB,
                                     1):
                    changed.append(kind)
                    verb = "grew" if delta > 0 else "shrank"
                    reasons.append(f"{DF_NAMES[kind]} {verb} from "
                                   f"{_si(before)} to {_si(now)}")
        if not reasons:
            return None
        st.baseline = sizes
        cli = engine  # what one types: the advice names the command, not the configured path
        advice = [f"{_si(r.reclaimable)} of {DF_WORDS[k]} reclaimable "
                  f"({PRUNE[k].format(cli=cli)})"
                  for k in DF_ORDER if k in by_kind and (r := by_kind[k]).reclaimable >= 1e6]
        reclaim_text = "; ".join(advice) if advice else "nothing reclaimable"
        summary = (f"{engine} container storage: " + "; ".join(reasons) + f" — {reclaim_text}; "
                   f"{_si(total)} in all")
        lines = [f"{engine} container storage uses {_si(total)}, {_si(reclaimable)} of it "
                 "reclaimable.", *(f"- {r}" for r in reasons), ""]
        for k in DF_ORDER:
            if k not in by_kind:
                continue
            r = by_kind[k]
            lines.append(f"{k.replace('_', ' ')}: {r.count} ({r.active} in use), {_si(r.size)}, "
                         f"{_si(r.reclaimable)} reclaimable: {PRUNE[k].format(cli=cli)}")
        lines += ["", "The watcher only advises: it never deletes anything. `image prune -a` "
                  "removes every image no container uses (without -a: only dangling ones).",
                  f"host: {self.ctx.hostname}"]
        extra: dict[str, Any] = {"engine": engine, "total_bytes": total,
                                 "reclaimable_bytes": reclaimable, "reasons": crossed + changed}
        for k, r in by_kind.items():
            extra[f"{k}_bytes"] = r.size
            extra[f"{k}_reclaimable_bytes"] = r.reclaimable
            extra[f"{k}_count"] = r.count
            extra[f"{k}_active"] = r.active
        if crossed:
            extra["threshold_bytes"] = {"total": int(total_thr), "reclaimable": int(recl_thr)}
        return self.ctx.event(self.name, CATEGORY, "disk", summary, detail="\n".join(lines),
                              severity=Severity.WARNING if crossed else Severity.INFO,
                              tags=["container", engine, "disk"], **extra)


async def _end(proc: asyncio.subprocess.Process) -> None:
    """Terminate a child still running, then kill it if it does not go."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), 5)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
