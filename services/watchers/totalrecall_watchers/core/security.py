"""Security watcher: sudo, su, failed logins, new users and groups, from the auth log.

Sources, like the journal watcher's: journald (`journalctl --follow` of the auth and authpriv
facilities, every priority: a successful sudo is a notice, a new user an info) when the machine
has it, else the text auth logs (`/var/log/auth.log` on Debian/Ubuntu, `/var/log/secure` on
Fedora/RHEL), tailed with `LogTail`. Each line is read by `authlog.classify`; what it recognises
becomes a `security/<kind>` event, the rest is ignored (and left to the journal watcher).

* Failures (`sudo_failure`, `su_failure`, `auth_failure`) are warnings, one event each, until a
  burst: the `burst_threshold`-th failure of one remote host (else one user) within
  `burst_window_s` is one error event, the later ones of that window are counted and told in one
  more event when the window ends; over `global_burst_threshold` failures of any source in a
  window (a distributed attack) the same happens for all of them together.
* Account changes (users, groups, memberships) are warnings; who made them is the account
  tool's own word (`gpasswd`: "by root"), else the user whose sudo ran that tool just before
  (within `attribution_window_s`), else journald's login uid of the process.
* Command lines (sudo's `COMMAND=`, pkexec's) are scrubbed as argv (`scrub_command_text`).
* Identical lines of one process within `dedup_window_s` are one event (a line read twice).

This module decides (`SecurityParser`); `adapters/security.py` is the watcher that follows the
journal or tails the auth logs, and looks up the login uid's name.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent
from totalrecall_schema.templates import exact_form

from .authlog import ACCOUNT_TOOLS, AuthRecord, classify
from .base import EventContext
from .journal import entry_field
from .security_render import Burst, SecurityReport

if TYPE_CHECKING:
    from ..settings import SecuritySettings

#: A numeric uid → its user's name (`uid N` when unknown), None when it is not one
#: (`adapters/users.py`'s `uid_name`).
UserName = Callable[[str | None], str | None]

MAX_DEDUP_KEYS = 5000
ACCOUNT_KINDS = frozenset({"user_added", "user_removed", "user_modified", "group_added",
                           "group_removed", "group_modified", "group_membership",
                           "password_change"})
#: Tools whose sudo may be the author of an account change (besides ACCOUNT_TOOLS).
_ACCOUNT_COMMANDS = ACCOUNT_TOOLS | {"vipw", "vigr", "visudo"}


def claims(ident: str, message: str) -> bool:
    """True for a line the security watcher reports (or deliberately drops as a companion)."""
    return classify(ident, message) is not None


@dataclass
class _Sudo:
    at: float
    host: str
    user: str
    program: str
    command: str


def _program(command: str) -> str:
    """The program a sudo command line runs (past `env`, `sh -c`)."""
    words = [w for w in command.split() if "=" not in w and not w.startswith("-")]
    for w in words:
        base = os.path.basename(w)
        if base not in ("env", "sh", "bash", "dash", "zsh", "nice", "nohup", "timeout"):
            return base
    return os.path.basename(words[0]) if words else ""


class SecurityParser:
    """Pure but for the clock: entries → events, with dedup, bursts and attribution."""

    def __init__(self, ctx: EventContext, settings: SecuritySettings, *,
                 source: str = "security", user_name: UserName | None = None) -> None:
        self.ctx = ctx
        self.s = settings
        self.source = source
        #: Names the login uid of an account change (None: not attributed by login uid).
        self.user_name = user_name
        self._seen: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self._bursts: dict[str, Burst] = {}
        self.report = SecurityReport(ctx, source, burst_window_s=settings.burst_window_s,
                                     max_command_chars=settings.max_command_chars)
        self._sudo: deque[_Sudo] = deque(maxlen=200)
        self.deduplicated = 0
        self.companions = 0
        self.burst_suppressed = 0
        self.parse_errors = 0

    # --- input ----------------------------------------------------------------------------
    def parse(self, line: str | bytes) -> list[MemoryEvent]:
        """One `journalctl -o json` line."""
        try:
            entry = json.loads(line)
        except ValueError:
            self.parse_errors += 1
            return []
        if not isinstance(entry, dict):
            self.parse_errors += 1
            return []
        return self.parse_entry(entry)

    def parse_entry(self, entry: dict[str, Any], *, log_file: str | None = None
                    ) -> list[MemoryEvent]:
        message = (entry_field(entry, "MESSAGE") or "").strip()
        ident = entry_field(entry, "SYSLOG_IDENTIFIER") or entry_field(entry, "_COMM") or ""
        rec = classify(ident, message)
        if rec is None and ": pam_" in message:  # "gdm-password]: pam_unix(…": a bracket in
            ident, _, message = message.partition(": ")  # the name: no syslog identifier
            ident = ident.rsplit(" ", 1)[-1]
            rec = classify(ident, message)
        events = self.flush()
        if rec is None:
            return events
        if not rec.kind:
            self.companions += 1
            return events
        origin = self.ctx.origin(entry_field(entry, "_HOSTNAME"), entry_field(entry, "_MACHINE_ID"))
        pid = entry_field(entry, "_PID")
        now = self.ctx.clock.monotonic()
        if not rec.failure or pid:  # a failure without a pid is always counted: a burst
            key = (origin.get("host", ""), ident, pid or "", exact_form(message))
            last = self._seen.get(key)
            if last is not None and now - last < self.s.dedup_window_s:
                self.deduplicated += 1
                return events
            self._seen[key] = now
            self._seen.move_to_end(key)
            while len(self._seen) > MAX_DEDUP_KEYS:
                self._seen.popitem(last=False)
        extra: dict[str, Any] = {**origin}
        if pid and pid.isdigit():
            extra["pid"] = int(pid)
        if log_file is not None:
            extra["log_file"] = log_file
        host = origin.get("host", "")
        if rec.kind in ("sudo", "sudo_failure") and rec.command and rec.user:
            self._sudo.append(_Sudo(now, host, rec.user, _program(rec.command), rec.command))
        via = None
        if rec.kind in ACCOUNT_KINDS and rec.by in (None, "root"):
            via = self._attribute(rec, host, now, entry_field(entry, "_AUDIT_LOGINUID"))
        if rec.failure:
            events += self._failure(rec, message, ident, extra)
        else:
            events.append(self.report.event(rec, message, ident, extra, via=via))
        return events

    def _attribute(self, rec: AuthRecord, host: str, now: float,
                   loginuid: str | None) -> str | None:
        """Who made an account change: the sudo that ran the tool, else the login uid."""
        names = {n for n in (rec.target, rec.group) if n}
        best: _Sudo | None = None
        for s in reversed(self._sudo):
            if now - s.at > self.s.attribution_window_s:
                break
            if s.host != host or s.program not in _ACCOUNT_COMMANDS:
                continue
            # Its command names the account or group, or runs the very tool that logged it.
            if any(n in s.command.split() or f"{n}:" in s.command for n in names) \
                    or s.program == rec.service:
                best = s
                break
        if best is not None:
            rec.by = best.user
            return "sudo"
        name = self.user_name(loginuid) if self.user_name else None
        if name and name != rec.by:
            rec.by = name
            return "login uid"
        return None

    # --- bursts ---------------------------------------------------------------------------
    def _burst_key(self, rec: AuthRecord) -> str:
        if rec.remote_host:
            return f"host {rec.remote_host}"
        return f"user {rec.user or rec.target or '?'}"

    def _failure(self, rec: AuthRecord, message: str, ident: str,
                 extra: dict[str, Any]) -> list[MemoryEvent]:
        now = self.ctx.clock.monotonic()
        wall = self.ctx.clock.now()
        states = []
        for key in (self._burst_key(rec), "*"):
            b = self._bursts.get(key)
            if b is None:
                b = self._bursts[key] = Burst(now, wall, wall,
                                               origin={k: v for k, v in extra.items()
                                                       if k in ("host", "machine_id")})
            b.count += 1
            b.last_at = wall
            b.users[rec.user or rec.target or "?"] += 1
            if rec.remote_host:
                b.hosts[rec.remote_host] += 1
            b.services[rec.service or ident] += 1
            states.append((key, b))
        (key, own), (_, every) = states
        if every.reported or own.reported:
            (every if every.reported else own).suppressed += 1
            self.burst_suppressed += 1
            return []
        if every.count >= self.s.global_burst_threshold > 0:
            every.reported = True
            return [self.report.burst_event("*", every, rec, extra, first=True)]
        if own.count >= self.s.burst_threshold > 0:
            own.reported = True
            return [self.report.burst_event(key, own, rec, extra, first=True)]
        return [self.report.event(rec, message, ident, extra)]

    def flush(self) -> list[MemoryEvent]:
        """The windows that ended: one event each for the failures they only counted."""
        now = self.ctx.clock.monotonic()
        out = []
        for key, b in list(self._bursts.items()):
            if now - b.start < self.s.burst_window_s:
                continue
            del self._bursts[key]
            if b.suppressed:
                out.append(self.report.burst_event(key, b, None, dict(b.origin), first=False))
        return out
