"""Containers watcher, pure but for the clock: engine events → `system.container` events (stop,
kill and oom paired with the `die` that follows, health transitions only, repeats deduplicated)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from totalrecall_schema import MemoryEvent

from .base import EventContext
from .containers_events import (
    CATEGORY,
    LIFECYCLE_KINDS,
    MAX_KEYS,
    MAX_VALUE_CHARS,
    OOM_EXIT_CODE,
    STOP_SIGNALS,
    Container,
    EngineEvent,
    OomEvidence,
    signal_name,
)
from .containers_render import render
from .scrub import scrub_extra


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
        self.containers: OrderedDict[tuple[str, str], Container] = OrderedDict()
        self._last: OrderedDict[tuple[Any, ...], tuple[float, int]] = OrderedDict()
        self.deduplicated = 0
        self.ignored = 0

    # --- state --------------------------------------------------------------------------------
    def _container(self, ev: EngineEvent) -> Container:
        key = (ev.engine, ev.id)
        c = self.containers.get(key)
        if c is None:
            c = self.containers[key] = Container(ev.engine, ev.id)
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

    def _die(self, c: Container, ev: EngineEvent, now: float,
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

    def _health(self, c: Container, ev: EngineEvent, now: float) -> list[MemoryEvent]:
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

    def _emit(self, kind: str, c: Container, ev: EngineEvent, now: float, *,
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

    def _labels(self, c: Container) -> dict[str, str]:
        return {k: scrub_extra(c.labels[k])[:MAX_VALUE_CHARS] for k in self.label_keys
                if c.labels.get(k)}

    def _event(self, kind: str, c: Container, ev: EngineEvent, *, oom: OomEvidence | None,
               how: str | None, previous_health: str | None, died: bool,
               repeats: int) -> MemoryEvent:
        labels = self._labels(c)
        r = render(
            kind, c, ev, labels, oom=oom, how=how, previous_health=previous_health, died=died,
            repeats=repeats, window_s=self.window, hostname=self.ctx.hostname)
        code = ev.exit_code
        event = self.ctx.event(self.source, CATEGORY, kind, r.summary, detail="\n".join(r.lines),
                               severity=r.severity, exit_code=code if kind != "start" else None,
                               tags=r.tags, **r.extra)
        digest = hashlib.sha256(f"{self.ctx.hostname}\x00{ev.key}\x00{kind}".encode()).hexdigest()
        update: dict[str, Any] = {"id": f"ctr-{digest[:40]}"}
        if ev.at is not None:
            update["timestamp"] = ev.at
        return event.model_copy(update=update)
