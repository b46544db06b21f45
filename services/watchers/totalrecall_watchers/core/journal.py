"""Journal watcher: follow `journalctl -f -o json`, keep errors and warnings (PRIORITY ≤ 4).

A failing systemd unit becomes `system.service/fail`, kernel messages `error/kernel`, the rest
`error/system`. Identical messages from the same unit (equal but for timestamps and spacing) are
reported once per dedup window (5 minutes by default); messages that differ in a number, an IP,
a user or an id are different events and are all reported.

Text log files are a second source (`log_files.py`): configured application logs always
(`error/application`), and syslog files (`/var/log/syslog`, `/var/log/messages`) when there is no
journald, so a machine without systemd still reports its errors. Their lines go through the same
classification, dedup window, rate limit and scrubbing.

This module reads the entries and decides (`JournalParser`); `adapters/journal.py` is the watcher
that follows journalctl and tails the files.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from totalrecall_schema import MemoryEvent, Severity
from totalrecall_schema.templates import exact_form

from .base import EventContext

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
