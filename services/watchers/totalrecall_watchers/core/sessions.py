"""User session watcher: logins and logouts, the diff of who is logged in between two polls
(read by `adapters/sessions.py`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from totalrecall_schema import MemoryEvent

from .base import EventContext, Watcher

Session = tuple[str, str, str, float]  # name, terminal, host, started


class SessionsWatcher(Watcher):
    name = "sessions"

    def __init__(self, ctx: EventContext, *, source: Callable[[], list[Session]],
                 interval_s: float = 30.0) -> None:
        super().__init__(ctx)
        self.interval_s = interval_s
        self.source = source
        self.prev: set[Session] | None = None

    def poll(self) -> list[MemoryEvent]:
        now = set(self.source())
        events: list[MemoryEvent] = []
        if self.prev is not None:
            for s in sorted(now - self.prev):
                events.append(self._ev("login", s))
            for s in sorted(self.prev - now):
                events.append(self._ev("logout", s))
        self.prev = now
        return events

    def _ev(self, sub: str, s: Session) -> MemoryEvent:
        name, term, host, started = s
        where = f" on {term}" if term else ""
        src = f" from {host}" if host else ""
        since = datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds")
        verb = "logged in" if sub == "login" else "logged out"
        return self.ctx.event(self.name, "security", sub, f"user {name} {verb}{where}{src}",
                              detail=f"user: {name}\nterminal: {term}\nhost: {host}\n"
                                     f"session started: {since}",
                              actor=name or "system", tags=["session", sub], user=name,
                              terminal=term, remote_host=host)
