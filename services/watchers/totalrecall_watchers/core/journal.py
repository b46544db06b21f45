"""Journal watcher: follow `journalctl -f -o json`, keep errors and warnings (PRIORITY ≤ 4).

A failing systemd unit becomes `system.service/fail`, kernel messages `error/kernel`, the rest
`error/system`. Identical messages from the same unit (equal but for timestamps and spacing) are
reported once per dedup window (5 minutes by default); messages that differ in a number, an IP,
a user or an id are different events and are all reported.

Text log files are a second source (`log_files.py`): configured application logs always
(`error/application`), and syslog files (`/var/log/syslog`, `/var/log/messages`) when there is no
journald, so a machine without systemd still reports its errors. Their lines go through the same
classification, dedup window, rate limit and scrubbing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import shutil
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent, Severity
from totalrecall_schema.templates import exact_form

from ..adapters.processes import end_process
from .base import Emit, EventContext, Unavailable, Watcher
from .log_files import LogTail, text_entry

if TYPE_CHECKING:
    from ..settings import JournalSettings

log = logging.getLogger(__name__)

JOURNAL_DIRS = (Path("/var/log/journal"), Path("/run/log/journal"))
PRIORITY_NAMES = {0: "emerg", 1: "alert", 2: "crit", 3: "err", 4: "warning", 5: "notice",
                  6: "info", 7: "debug"}
_UNIT_FAIL = re.compile(r"(?i)\b(failed with result|failed to start|main process exited, "
                        r"code=|start request repeated too quickly|entered failed state)")
_OOM = re.compile(r"(?i)out of memory: killed process (\d+) \(([^)]*)\)")
MAX_DEDUP_KEYS = 5000
#: `(identifier, message, log file) → True` when another watcher reports that entry from that
#: source (the log file it came from; None: the journal).
Claim = Callable[[str, str, "str | None"], bool]


def normalise(message: str) -> str:
    """The message as the dedup window compares it: only timestamps and spacing normalised."""
    return exact_form(message)


def entry_field(entry: dict[str, Any], name: str) -> str | None:
    """A journal entry's field as text (journald gives binary fields as byte arrays)."""
    v = entry.get(name)
    if v is None:
        return None
    if isinstance(v, list):  # binary fields come as byte arrays
        if v and all(isinstance(b, int) for b in v):
            return bytes(v).decode("utf-8", "replace")
        v = v[0] if v else ""
    return str(v)


def journald_reason(enabled: bool, command: list[str], skip_check: bool = False) -> str | None:
    """None when journald can be followed with `command`, else why not."""
    if not enabled:
        return "journald disabled in the settings"
    if not command or shutil.which(command[0]) is None:
        return f"{command[0] if command else 'journalctl'} not found on PATH"
    if skip_check:
        return None
    journals = [p for d in JOURNAL_DIRS if d.is_dir() for p in d.rglob("*.journal*")]
    if not journals:
        return ("no systemd journal on this machine (no journal files under "
                + ", ".join(str(d) for d in JOURNAL_DIRS) + ")")
    return None


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


class JournalParser:
    """Pure: one JSON line → an event (or None), with the dedup window."""

    def __init__(self, ctx: EventContext, *, max_priority: int = 4,
                 dedup_window_s: float = 300.0, source: str = "journal",
                 claim: Claim | None = None) -> None:
        self.ctx = ctx
        self.max_priority = max_priority
        self.window = dedup_window_s
        self.source = source
        #: Entries another watcher reports (the security watcher's sudo, su and PAM lines):
        #: skipped here, counted in `claimed`.
        self.claim = claim
        self._seen: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self.deduplicated = 0
        self.skipped = 0
        self.claimed = 0
        self.parse_errors = 0

    def parse(self, line: str | bytes) -> MemoryEvent | None:
        try:
            entry = json.loads(line)
        except ValueError:
            self.parse_errors += 1
            return None
        if not isinstance(entry, dict):
            self.parse_errors += 1
            return None
        return self.parse_entry(entry)

    def parse_entry(self, entry: dict[str, Any], *, application: bool = False,
                    log_file: str | None = None) -> MemoryEvent | None:
        """A journal entry (or one made from a text log line) → an event, or None.
        `application`: a line of an application's own log (`error/application`)."""
        try:
            prio = int(entry_field(entry, "PRIORITY") or 6)
        except ValueError:
            prio = 6
        message = (entry_field(entry, "MESSAGE") or "").strip()
        if prio > self.max_priority or not message:
            self.skipped += 1
            return None
        unit = (entry_field(entry, "_SYSTEMD_UNIT") or entry_field(entry, "UNIT")
                or entry_field(entry, "USER_UNIT") or entry_field(entry, "_SYSTEMD_USER_UNIT"))
        ident = entry_field(entry, "SYSLOG_IDENTIFIER") or entry_field(entry, "_COMM") or unit or "journal"
        if self.claim is not None and self.claim(ident, message, log_file):
            self.claimed += 1
            return None
        transport = entry_field(entry, "_TRANSPORT")
        # A journal may hold other machines' entries (systemd-journal-remote, a syslog file
        # gathering them): each is its host's event, and two hosts' same message are two.
        origin = self.ctx.origin(entry_field(entry, "_HOSTNAME"), entry_field(entry, "_MACHINE_ID"))
        now = self.ctx.clock.monotonic()
        key = (origin.get("host", ""), unit or ident, normalise(message))
        last = self._seen.get(key)
        if last is not None and now - last < self.window:
            self.deduplicated += 1
            return None
        self._seen[key] = now
        self._seen.move_to_end(key)
        while len(self._seen) > MAX_DEDUP_KEYS:
            self._seen.popitem(last=False)

        failing_unit = entry_field(entry, "UNIT") or entry_field(entry, "USER_UNIT")
        severity = Severity.CRITICAL if prio <= 2 else Severity.ERROR if prio == 3 \
            else Severity.WARNING
        detail_lines = [message[:8000], f"priority: {PRIORITY_NAMES.get(prio, prio)} ({prio})"]
        for label, name in (("unit", "_SYSTEMD_UNIT"), ("identifier", "SYSLOG_IDENTIFIER"),
                            ("pid", "_PID"), ("command", "_COMM"), ("executable", "_EXE"),
                            ("boot", "_BOOT_ID")):
            v = entry_field(entry, name)
            if v:
                detail_lines.append(f"{label}: {v}")
        extra: dict[str, Any] = {"priority": prio, "identifier": ident, **origin}
        if log_file is not None:
            detail_lines.append(f"log file: {log_file}")
            extra["log_file"] = log_file
        detail = "\n".join(detail_lines)
        first_line = message.splitlines()[0][:300]
        pid = entry_field(entry, "_PID")
        if pid and pid.isdigit():
            extra["pid"] = int(pid)
        if failing_unit and (ident == "systemd" or ident.startswith("systemd"))\
                and _UNIT_FAIL.search(message):
            return self.ctx.event(
                self.source, "system.service", "fail", f"{failing_unit}: {first_line}",
                detail=detail, severity=Severity.ERROR, service=failing_unit,
                tags=["journal", "service", "fail"], **extra)
        oom = _OOM.search(message) if transport == "kernel" else None
        if oom:
            extra["pid"] = int(oom.group(1))
            return self.ctx.event(
                self.source, "system.process", "oom_kill",
                f"{oom.group(2)} (PID {oom.group(1)}) killed by the kernel OOM killer",
                detail=detail, severity=Severity.ERROR, tags=["journal", "kernel", "oom"],
                process=oom.group(2), **extra)
        if transport == "kernel":
            return self.ctx.event(self.source, "error", "kernel", f"kernel: {first_line}",
                                  detail=detail, severity=severity,
                                  tags=["journal", "kernel"], **extra)
        if application:
            return self.ctx.event(self.source, "error", "application", f"{ident}: {first_line}",
                                  detail=detail, severity=severity, service=unit,
                                  tags=["log", PRIORITY_NAMES.get(prio, "log")], **extra)
        return self.ctx.event(self.source, "error", "system", f"{ident}: {first_line}",
                              detail=detail, severity=severity, service=unit,
                              tags=["journal", PRIORITY_NAMES.get(prio, "log")], **extra)


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
        self.tails: list[LogTail] = []

    def _journald_reason(self) -> str | None:
        return journald_reason(self.settings.journald, self.settings.command,
                               self.settings.skip_availability_check)

    def check_available(self) -> str | None:
        """journald when there is one; text logs: the application ones always, the syslog
        files only without journald. Unavailable when there is neither."""
        journald_reason = self._journald_reason()
        self.journald = journald_reason is None
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
        sources = (["journald"] if self.journald else []) + [str(t.path) for t in self.tails]
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

        await follow_lines(self.settings.command, on_line, stop)
