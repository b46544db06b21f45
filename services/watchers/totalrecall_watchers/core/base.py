"""What every watcher shares: the clock, the event factory, availability and the watcher base."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from totalrecall_schema import MemoryEvent, Severity
from totalrecall_schema.host import normalize_hostname

from .scrub import scrub_extra

#: What a streaming watcher calls with each event (rate limit, then publish or spool).
Emit = Callable[[MemoryEvent], Awaitable[bool]]


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A settable clock for tests."""

    def __init__(self, start: float = 1000.0, wall: datetime | None = None) -> None:
        self.t = start
        self.wall0 = wall or datetime(2026, 1, 1, tzinfo=UTC)
        self.t0 = start

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        from datetime import timedelta

        return self.wall0 + timedelta(seconds=self.t - self.t0)


class Unavailable(Exception):
    """The watcher's source does not exist on this machine (reason in the message)."""


@dataclass
class EventContext:
    """What every event of this service carries: namespace, host, the clock."""

    namespace: str = "default"
    hostname: str = "localhost"
    clock: Clock = field(default_factory=SystemClock)
    #: This machine's stable id (`totalrecall_schema.host`); None: `MemoryEvent` fills it in
    #: when `hostname` is the machine's own name.
    machine_id: str | None = None

    def origin(self, hostname: str | None, machine_id: str | None) -> dict[str, str]:
        """The `host` (and `machine_id`) extras of an event another host reported (a journal
        entry forwarded from it, a line of its syslog): none when it is this machine, by its id
        or, without one, by its name (a syslog line gives the short name: the first label)."""
        here = normalize_hostname(self.hostname)
        if machine_id:
            if machine_id.lower() == (self.machine_id or "").lower():
                return {}
        elif not hostname or normalize_hostname(hostname).split(".")[0] == here.split(".")[0]:
            return {}
        out = {"host": normalize_hostname(hostname or "") or f"machine-{machine_id}"[:20]}
        if machine_id:
            out["machine_id"] = machine_id.lower()
        return out

    def event(self, source: str, category: str, subcategory: str, summary: str, *,
              detail: str = "", severity: Severity = Severity.INFO, actor: str = "system",
              service: str | None = None, path: str | None = None, generation: int | None = None,
              exit_code: int | None = None, tags: list[str] | None = None,
              **extra: Any) -> MemoryEvent:
        """Build a `MemoryEvent`; every text passes the extra scrubber first (MemoryEvent
        scrubs again on construction)."""
        clean_tags = [scrub_extra(t)[:64] for t in tags or [] if t]
        meta: dict[str, Any] = {"severity": severity, "tags": clean_tags[:32],
                                "host": self.hostname}
        if service is not None:
            meta["service"] = scrub_extra(service)
        if path is not None:
            meta["path"] = scrub_extra(path)
        if generation is not None:
            meta["generation"] = generation
        if exit_code is not None:
            meta["exit_code"] = exit_code
        for k, v in extra.items():
            meta[k] = scrub_extra(v) if isinstance(v, str) else v
        # An event of another host (`host=`: a forwarded journal entry) has its own machine id
        # or none; this machine's id goes with this machine's name only.
        if self.machine_id is not None and meta["host"] == self.hostname:
            meta.setdefault("machine_id", self.machine_id)
        return MemoryEvent(
            namespace=self.namespace, timestamp=self.clock.now(), category=category,
            subcategory=subcategory, actor=actor, source=f"watcher.{source}",
            summary=scrub_extra(summary)[:1900], detail=scrub_extra(detail)[:30000], metadata=meta,
        )


class Watcher:
    """Base: a polling watcher implements `poll()`; a streaming one overrides `run()`."""

    name: str = "watcher"
    interval_s: float = 60.0

    def __init__(self, ctx: EventContext) -> None:
        self.ctx = ctx
        self.note: str | None = None  # extra detail for /health (e.g. paths skipped)

    def check_available(self) -> str | None:
        """None when the source exists, else the reason it does not (shown in /health)."""
        return None

    def poll(self) -> list[MemoryEvent]:
        raise NotImplementedError

    async def run(self, emit: Emit, stop: asyncio.Event) -> None:  # pragma: no cover - runner
        raise NotImplementedError

    @property
    def streaming(self) -> bool:
        return type(self).run is not Watcher.run


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
