"""The journal watcher: follows `journalctl -f -o json` (when there is a journald) and tails the
text logs (`adapters/log_tail.py`); `core/journal.py`'s `JournalParser` decides what each entry
is worth."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent

from ..core.base import Emit, EventContext, Unavailable, Watcher
from ..core.journal import Claim, JournalParser
from ..core.log_files import text_entry
from .log_tail import LogTail
from .processes import end_process
from .tasks import run_together

if TYPE_CHECKING:
    from ..settings import JournalSettings

log = logging.getLogger(__name__)

JOURNAL_DIRS = (Path("/var/log/journal"), Path("/run/log/journal"))
MACHINE_ID = Path("/etc/machine-id")
#: journalctl options that already say which journals to read.
_JOURNALS_CHOSEN = ("--merge", "-m", "--directory", "-D", "--file", "--machine", "-M", "--root",
                    "--image", "--namespace")


def journald_reason(enabled: bool, command: list[str], skip_check: bool = False, *,
                    dirs: Sequence[Path] = JOURNAL_DIRS,
                    readable: Callable[[Path], bool] = lambda p: os.access(p, os.R_OK)
                    ) -> str | None:
    """None when journald can be followed with `command`, else why not: no journalctl, no
    journal, or journals this user may not read (journalctl would follow nothing, silently)."""
    if not enabled:
        return "journald disabled in the settings"
    if not command or shutil.which(command[0]) is None:
        return f"{command[0] if command else 'journalctl'} not found on PATH"
    if skip_check:
        return None
    # A machine's journals are <dir>/<machine id>/*.journal: a directory this user may not
    # list hides its files from the search below, so it counts as unreadable too.
    places = [p for d in dirs if _is_dir(d)
              for p in [d, *(q for q in _listing(d) if _is_dir(q))]]
    journals = [p for d in dirs if _is_dir(d) for p in d.rglob("*.journal*")]
    if any(readable(p) for p in journals):
        return None
    shut = journals or [p for p in places if not readable(p)]
    if not shut:
        return ("no systemd journal on this machine (no journal files under "
                + ", ".join(str(d) for d in dirs) + ")")
    gids = sorted({p.stat().st_gid for p in shut})
    return (f"the journal ({shut[0]}{' …' if len(shut) > 1 else ''}) is not readable by "
            f"uid {os.getuid()} (groups {', '.join(map(str, sorted(os.getgroups())))}): run the "
            f"watchers in their group, gid {', '.join(map(str, gids))} (systemd-journal; "
            f"with docker compose: JOURNAL_GID={gids[0]} in .env)")


def _listing(d: Path) -> list[Path]:
    try:
        return list(d.iterdir())
    except OSError:  # absent, or not ours to list
        return []


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except OSError:  # Python 3.11 raises EACCES under a directory we may not list
        return False


def journal_command(command: list[str], *, dirs: Sequence[Path] = JOURNAL_DIRS,
                    machine_id: Path = MACHINE_ID) -> list[str]:
    """`command` reading every journal (`--merge`) when none of them is this machine's.

    journalctl reads only the journals of this machine's id (`/etc/machine-id`). A container
    that has the host's journal mounted in has another id or none, and would follow nothing
    while looking healthy."""
    if not command or Path(command[0]).name != "journalctl" or any(
            a.split("=", 1)[0] in _JOURNALS_CHOSEN for a in command[1:]):
        return command
    try:
        own = machine_id.read_text().strip()
    except OSError:
        own = ""
    if own and any(_is_dir(d / own) for d in dirs):
        return command
    return [command[0], "--merge", *command[1:]]


def journald_source(command: list[str]) -> str:
    """How /health names the journal followed by `command`."""
    return "journald (every machine's journals: --merge)" if "--merge" in command else "journald"


async def follow_lines(command: list[str], on_line: Callable[[bytes], Awaitable[None]],
                       stop: asyncio.Event) -> None:
    """Run `command` (`journalctl --follow …`) and hand each line of its output to `on_line`
    until `stop`; when it ends by itself: `Unavailable` (no journal) or RuntimeError."""
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL, limit=1 << 20)
    assert proc.stdout is not None and proc.stderr is not None
    stop_task = asyncio.create_task(stop.wait())
    try:
        while True:
            read = asyncio.create_task(proc.stdout.readline())
            done, _ = await asyncio.wait({read, stop_task}, return_when=asyncio.FIRST_COMPLETED)
            if stop_task in done:
                read.cancel()
                return
            line = read.result()
            if not line:
                break
            await on_line(line)
        err = (await proc.stderr.read(2000)).decode("utf-8", "replace").strip()
        rc = await proc.wait()
        if rc != 0 and ("not been booted with systemd" in err or "No journal" in err):
            raise Unavailable(err.splitlines()[0])
        raise RuntimeError(f"{command[0]} exited with {rc}: {err[:300]}")
    finally:
        stop_task.cancel()
        await end_process(proc)


class JournalWatcher(Watcher):
    name = "journal"

    def __init__(self, ctx: EventContext, settings: JournalSettings, *,
                 claim: Claim | None = None) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.parser = JournalParser(ctx, max_priority=settings.max_priority,
                                    dedup_window_s=settings.dedup_window_s, source=self.name,
                                    claim=claim)
        self.journald = False
        self.command = settings.command
        self.tails: list[LogTail] = []

    def _journald_reason(self) -> str | None:
        return journald_reason(self.settings.journald, self.settings.command,
                               self.settings.skip_availability_check)

    def check_available(self) -> str | None:
        """journald when there is one; text logs: the application ones always, the syslog
        files only without journald. Unavailable when there is neither."""
        journald_reason = self._journald_reason()
        self.journald = journald_reason is None
        self.command = journal_command(self.settings.command)
        wanted = [LogTail(p, application=True) for p in self.settings.log_files]
        if not self.journald:
            wanted += [LogTail(p, application=False) for p in self.settings.syslog_files]
        known = {t.path: t for t in self.tails}
        self.tails = [known.get(t.path, t) for t in wanted if t.available()]
        for t in self.tails:
            t.prime()
        if not self.journald and not self.tails:
            files = [*self.settings.log_files, *self.settings.syslog_files]
            return f"{journald_reason}; no log file to tail" + (
                f" (none of {', '.join(files)} exists)" if files else "")
        sources = ([journald_source(self.command)] if self.journald else []) + [
            str(t.path) for t in self.tails]
        self.note = "sources: " + ", ".join(sources)
        if not self.journald:
            self.note += f" (no journald: {journald_reason})"
        return None

    def stats(self) -> dict[str, int]:
        p = self.parser
        return {"deduplicated": p.deduplicated, "parse_errors": p.parse_errors,
                "claimed": p.claimed,
                "log_lines": sum(t.lines for t in self.tails)}

    def close(self) -> None:
        for t in self.tails:
            t.close()

    async def run(self, emit: Emit, stop: asyncio.Event) -> None:
        jobs = []
        if self.journald:
            jobs.append(asyncio.create_task(self._journal_or_files(emit, stop)))
        if self.tails:
            jobs.append(asyncio.create_task(self._tail_files(emit, stop)))
        await run_together(jobs)

    def _line_event(self, tail: LogTail, line: str) -> MemoryEvent | None:
        entry = text_entry(line, tail.ident)
        if entry is None:
            return None
        return self.parser.parse_entry(entry, application=tail.application,
                                       log_file=str(tail.path))

    async def _tail_files(self, emit: Emit, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for tail in self.tails:
                for line in tail.read_lines():
                    event = self._line_event(tail, line)
                    if event is not None:
                        await emit(event)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.settings.log_poll_s)

    async def _journal_or_files(self, emit: Emit, stop: asyncio.Event) -> None:
        try:
            await self._follow_journal(emit, stop)
        except Unavailable as exc:
            if not self.tails:
                raise
            log.info("journald unavailable (%s); the log files stay watched", exc)
            self.journald = False
            self.note = ("sources: " + ", ".join(str(t.path) for t in self.tails)
                         + f" (no journald: {exc})")

    async def _follow_journal(self, emit: Emit, stop: asyncio.Event) -> None:
        async def on_line(line: bytes) -> None:
            event = self.parser.parse(line)
            if event is not None:
                await emit(event)

        await follow_lines(self.command, on_line, stop)
