"""The security watcher: follows journald's auth and authpriv facilities, else tails the text
auth logs (`adapters/log_tail.py`); `core/security.py`'s `SecurityParser` decides what each line
is (with the users database for a login uid's name)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import TYPE_CHECKING

from ..core.base import Emit, EventContext, Unavailable, Watcher
from ..core.log_files import text_entry
from ..core.security import SecurityParser, claims
from .journal import follow_lines, journal_command, journald_reason, journald_source
from .log_tail import LogTail
from .tasks import run_together
from .users import uid_name

if TYPE_CHECKING:
    from ..settings import SecuritySettings


class SecurityWatcher(Watcher):
    name = "security"

    def __init__(self, ctx: EventContext, settings: SecuritySettings) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.parser = SecurityParser(ctx, settings, source=self.name, user_name=uid_name)
        self.journald = False
        self.command = settings.command
        self.tails: list[LogTail] = []
        #: Set once a source is found: from then on the journal watcher leaves these lines.
        self.active = False

    def claims(self, ident: str, message: str, log_file: str | None = None) -> bool:
        """For the journal watcher: True for a line this watcher reports (while it runs) from
        a source it reads itself: the journal when it follows journald, else one of its auth
        logs. An auth-looking line of another log (an application's, a syslog file only the
        journal watcher tails) stays the journal watcher's: nothing reads it here."""
        if not (self.active and claims(ident, message)):
            return False
        if log_file is None:
            return self.journald
        mine = {os.path.realpath(str(t.path)) for t in self.tails}
        return os.path.realpath(log_file) in mine

    def check_available(self) -> str | None:
        s = self.settings
        reason = journald_reason(s.journald, s.command, s.skip_availability_check)
        self.journald = reason is None
        self.command = journal_command(s.command)
        wanted = [] if self.journald else [LogTail(p, application=False) for p in s.log_files]
        known = {t.path: t for t in self.tails}
        self.tails = [known.get(t.path, t) for t in wanted if t.available()]
        for t in self.tails:
            t.prime()
        if not self.journald and not self.tails:
            return f"{reason}; no auth log to tail" + (
                f" (none of {', '.join(s.log_files)} exists)" if s.log_files else "")
        self.note = "sources: " + ", ".join(
            ([journald_source(self.command) + " (auth, authpriv)"] if self.journald else [])
            + [str(t.path) for t in self.tails])
        if not self.journald:
            self.note += f" (no journald: {reason})"
        self.active = True
        return None

    def stats(self) -> dict[str, int]:
        p = self.parser
        return {"deduplicated": p.deduplicated, "companion_lines": p.companions,
                "burst_suppressed": p.burst_suppressed, "parse_errors": p.parse_errors}

    def close(self) -> None:
        for t in self.tails:
            t.close()

    async def run(self, emit: Emit, stop: asyncio.Event) -> None:
        jobs = [asyncio.create_task(self._tail_and_flush(emit, stop))]
        if self.journald:
            jobs.append(asyncio.create_task(self._follow(emit, stop)))
        await run_together(jobs)

    async def _tail_and_flush(self, emit: Emit, stop: asyncio.Event) -> None:
        """The text logs' new lines, and the burst windows that ended (also with journald)."""
        while not stop.is_set():
            for tail in self.tails:
                for line in tail.read_lines():
                    entry = text_entry(line, tail.ident)
                    if entry is not None:
                        for event in self.parser.parse_entry(entry, log_file=str(tail.path)):
                            await emit(event)
            for event in self.parser.flush():
                await emit(event)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.settings.log_poll_s)

    async def _follow(self, emit: Emit, stop: asyncio.Event) -> None:
        async def on_line(line: bytes) -> None:
            for event in self.parser.parse(line):
                await emit(event)

        try:
            await follow_lines(self.command, on_line, stop)
        except Unavailable:
            self.active = False
            raise
