"""Containers watcher, pure: the engines' event lines, `container inspect` and the kernel log's
records parsed into what the lifecycle decides on (no I/O here; see adapters/containers.py)."""

from __future__ import annotations

import contextlib
import json
import re
import signal as _signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

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


def to_int(v: Any) -> int | None:
    """An engine's number (int or text) → int; None when absent or not a number."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(str(v).strip())
    except ValueError:
        return None


def _signal_number(v: Any) -> int | None:
    n = to_int(v)
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
        return _docker_event(engine, raw)
    if "Status" not in raw:
        raise ValueError("neither a podman nor a docker event")
    return _podman_event(engine, raw)


def _docker_event(engine: str, raw: dict[str, Any]) -> EngineEvent | None:
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
        exit_code=to_int(attrs.get("exitCode")), signal=_signal_number(attrs.get("signal")),
        health=health.lower() if health else None,
        labels={k: v for k, v in attrs.items() if k not in _DOCKER_NON_LABELS})


def _podman_event(engine: str, raw: dict[str, Any]) -> EngineEvent | None:
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
        exit_code=to_int(raw.get("ContainerExitCode")),
        health=str(health).lower() if health else None,
        labels={str(k): str(v) for k, v in labels.items()},
        pod_id=str(raw.get("PodID")) if raw.get("PodID") else None)


# --- the state of one container ------------------------------------------------------------------------
@dataclass
class Container:
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


def parse_inspect(out: str) -> tuple[bool, int | None]:
    """`<engine> container inspect <id>` → (State.OOMKilled, HostConfig.Memory or None).
    Raises ValueError (and the lookup errors of a malformed answer) when it is not one."""
    data = json.loads(out)
    info = data[0] if isinstance(data, list) and data else data
    state = info.get("State") or {}
    limit = to_int((info.get("HostConfig") or {}).get("Memory")) or None
    # A State that is not an object says nothing of an OOM kill; the limit still holds.
    return isinstance(state, dict) and state.get("OOMKilled") is True, limit


def kmsg_record(line: bytes) -> tuple[float, str] | None:
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


def find_oom_kill(records: Iterable[tuple[float, str]], container_id: str,
                  since: float) -> tuple[str, ...]:
    """The kernel's lines about an OOM kill in this container's cgroup at or after `since`
    (seconds since boot; empty: none): the cgroup's `memory: usage …, limit …` when the kill
    was the cgroup's, the `oom-kill:` record, the `Killed process` one."""
    if len(container_id) < 12:
        return ()
    found: list[str] = []
    usage: str | None = None
    for ts, msg in records:
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


KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\)")
CGROUP_LIMIT = re.compile(r"^memory: usage (\d+)kB, limit (\d+)kB")


def kernel_memory_limit(lines: tuple[str, ...]) -> int | None:
    """The cgroup's memory limit (bytes) of the kernel's OOM report, None when unlimited."""
    m = CGROUP_LIMIT.match(lines[0]) if lines else None
    if m and int(m.group(2)) < 2**50:  # not "unlimited"
        return int(m.group(2)) * 1024
    return None


def si(n: float) -> str:
    """Bytes in decimal units, as `podman/docker system df` shows them (3.2 GB)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
