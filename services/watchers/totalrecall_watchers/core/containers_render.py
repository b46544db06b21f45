"""Containers watcher, pure: what one lifecycle event of a container says (summary, detail lines,
severity, tags, extra fields), kind by kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from totalrecall_schema import Severity

from .containers_events import (
    KILLED,
    MAX_VALUE_CHARS,
    Container,
    EngineEvent,
    OomEvidence,
    si,
    signal_name,
)
from .scrub import scrub_extra


@dataclass
class Rendered:
    """An event being written: each kind fills in its summary and adds to the rest."""

    who: str
    name: str
    summary: str = ""
    severity: Severity = Severity.INFO
    lines: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def render(kind: str, c: Container, ev: EngineEvent, labels: dict[str, str], *,
           oom: OomEvidence | None, how: str | None, previous_health: str | None, died: bool,
           repeats: int, window_s: float,
           hostname: str) -> Rendered:
    """The summary, detail lines, severity, tags and extra fields of one event of this kind."""
    name = scrub_extra(c.name or c.id[:12])[:MAX_VALUE_CHARS]
    image = scrub_extra(c.image)[:300]
    project = labels.get("com.docker.compose.project") or labels.get(
        "io.podman.compose.project")
    service = labels.get("com.docker.compose.service")
    r = Rendered(who=f"{c.engine} container '{name}'" + (f" (image {image})" if image else ""),
                 name=name, tags=["container", c.engine, kind])
    r.extra = {"engine": c.engine, "container_id": c.id[:12], "container_name": name,
               "image": image}
    if labels:
        r.extra["labels"] = labels
    if project:
        r.extra["compose_project"] = project
    if service:
        r.extra["compose_service"] = service
    if c.pod_id:
        r.extra["pod_id"] = c.pod_id[:12]
    code = ev.exit_code
    if kind == "start":
        r.summary = f"{r.who} started"
    elif kind == "exit":
        r.summary = f"{r.who} exited normally (exit code 0)"
        r.lines.append("The container's main process finished by itself with exit code 0.")
    elif kind == "stop":
        _stop(r, c, code, how)
    elif kind == "die":
        _die(r, c, code, oom)
    elif kind == "oom":
        _oom(r, code, oom, died)
    else:
        _health(r, ev, previous_health)
    if project:
        r.summary += f" — compose project {project}" + (f", service {service}" if service else "")
    if repeats:
        r.extra["repeats"] = repeats
        r.lines.append(f"{repeats} more like it within {window_s:g} s before were not "
                       "reported separately.")
    r.lines += [f"engine: {c.engine}", f"container: {name} ({c.id[:12]})",
                f"image: {image or '-'}"]
    if code is not None:
        r.lines.append(f"exit code: {code}")
    r.lines += [f"label {k}: {v}" for k, v in labels.items()]
    r.lines.append(f"host: {hostname}")
    return r


def _stop(r: Rendered, c: Container, code: int | None, how: str | None) -> None:
    r.summary = f"{r.who} was stopped ({how or c.engine + ' stop'})" + (
        f", exit code {code}" if code is not None else "")
    if code is not None and code > 128:
        r.summary += f" ({signal_name(code - 128)})"
    r.lines.append(f"Stopped on request: {how or c.engine + ' stop'}; not a crash.")
    r.extra["stopped_by"] = how or f"{c.engine} stop"


def _die(r: Rendered, c: Container, code: int | None, oom: OomEvidence | None) -> None:
    r.severity = Severity.ERROR
    if code is not None and code > 128:
        sig = signal_name(code - 128)
        r.summary = f"{r.who} died: killed by {sig} (exit code {code})"
        r.extra["signal"] = sig
        r.lines.append(f"The main process was killed by {sig} (exit code {code} = 128 + "
                       f"{code - 128}), and nobody asked the engine to stop it.")
    else:
        r.summary = f"{r.who} died with exit code {code if code is not None else 'unknown'}"
        r.lines.append("The container's main process exited with an error (non-zero exit "
                       "code); its logs say why: "
                       f"`{c.engine} logs {r.name}`.")
    if oom is not None and oom.checked:
        r.lines.append("Not killed by the OOM killer as far as "
                       + " and ".join(oom.checked) + " tell.")
    r.extra["oom_killed"] = False


def _oom(r: Rendered, code: int | None, oom: OomEvidence | None, died: bool) -> None:
    r.severity = Severity.ERROR
    limit = oom.memory_limit if oom else None
    if died:
        r.summary = (f"{r.who} was killed by the kernel's OOM killer (out of memory)"
                     + (f", exit code {code}" if code is not None else ""))
    else:
        r.summary = (f"A process in {r.who} was killed by the kernel's OOM killer (out of "
                     "memory); the container kept running")
    if limit:
        r.summary += f", memory limit {si(limit)}"
        r.extra["memory_limit_bytes"] = limit
    r.extra["oom_killed"] = True
    if oom is not None and oom.via:
        r.extra["oom_source"] = oom.via
        r.lines.append(f"OOM kill reported by: {oom.via}.")
    for kline in oom.kernel_lines if oom else ():
        m = KILLED.search(kline)
        if m:
            r.extra["killed_process"] = scrub_extra(m.group(2))[:64]
            r.extra["killed_pid"] = int(m.group(1))
        r.lines.append(f"kernel: {kline[:600]}")
    r.lines.append("It ran out of memory: raise its memory limit (--memory) or find what "
                   "grew.")
    r.tags.append("oom")


def _health(r: Rendered, ev: EngineEvent, previous_health: str | None) -> None:
    status = ev.health or "unknown"
    r.extra["health"] = status
    r.extra["previous_health"] = previous_health or "unknown"
    if status == "unhealthy":
        r.severity = Severity.WARNING
        r.summary = f"{r.who} became unhealthy (its health check fails)"
    elif previous_health == "unhealthy":
        r.summary = f"{r.who} is healthy again (its health check passes)"
    else:
        r.summary = f"{r.who} became healthy"
    r.summary += f"; was {previous_health or 'unknown'}"
    r.lines.append(f"health: {previous_health or 'unknown'} → {status}")
    r.tags.append(status)
