"""Security watcher, pure: what one auth record, or one burst of failures, says as an event."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from totalrecall_schema import MemoryEvent, Severity

from .authlog import AuthRecord
from .base import EventContext
from .scrub import scrub_command_text

#: Groups whose members administer the machine: a new member is said to be one.
PRIVILEGED_GROUPS = frozenset({"sudo", "wheel", "admin", "root", "adm", "docker", "lxd",
                               "libvirt", "disk", "shadow", "systemd-journal", "kvm"})


@dataclass
class Burst:
    """Failures of one source (a remote host, a user, or all: `*`) in one window."""

    start: float
    first_at: datetime
    last_at: datetime
    count: int = 0
    reported: bool = False  # the burst event went out: later failures are only counted
    suppressed: int = 0
    users: Counter[str] = field(default_factory=Counter)
    hosts: Counter[str] = field(default_factory=Counter)
    services: Counter[str] = field(default_factory=Counter)
    origin: dict[str, str] = field(default_factory=dict)


def top(c: Counter[str], n: int = 5) -> str:
    return ", ".join(f"{k} ({v})" if v > 1 else k for k, v in c.most_common(n))


class SecurityReport:
    """Writes the security watcher's events (`source`: the watcher's name)."""

    def __init__(self, ctx: EventContext, source: str, *, burst_window_s: float,
                 max_command_chars: int) -> None:
        self.ctx = ctx
        self.source = source
        self.burst_window_s = burst_window_s
        self.max_command_chars = max_command_chars

    def burst_event(self, key: str, b: Burst, rec: AuthRecord | None, extra: dict[str, Any],
                     *, first: bool) -> MemoryEvent:
        window = f"{self.burst_window_s:g} s"
        who = "from all sources" if key == "*" else f"from {key.removeprefix('host ')}" \
            if key.startswith("host ") else f"for {key.removeprefix('user ')}"
        services = ", ".join(b.services)
        kinds = "failed logins or sudo/su attempts" if key == "*" else \
            ("failed logins" if rec is None or rec.kind == "auth_failure" else
             f"{rec.kind.replace('_', ' ')}s")
        if first:
            summary = (f"Burst of {kinds}: {b.count} authentication failures {who} within "
                       f"{window} (users: {top(b.users)}; {services}); further ones this window "
                       "are counted, not reported one by one")
        else:
            summary = (f"{kinds.capitalize()} {who} went on: {b.suppressed} more authentication "
                       f"failures in the {window} window (users: {top(b.users)}; {services})")
        detail = "\n".join([
            f"failures in the window: {b.count}",
            f"not reported one by one: {b.suppressed}" if not first else "",
            f"window: {b.first_at.isoformat(timespec='seconds')} … "
            f"{b.last_at.isoformat(timespec='seconds')}",
            f"users: {top(b.users, 20)}",
            f"remote hosts: {top(b.hosts, 20)}" if b.hosts else "",
            f"services: {services}"]).replace("\n\n", "\n")
        sub = rec.kind if rec is not None else "auth_failure"
        if rec is None and key != "*" and len(b.services) == 1:
            svc = next(iter(b.services))
            sub = {"sudo": "sudo_failure", "su": "su_failure"}.get(svc, "auth_failure")
        meta = dict(extra)
        meta.update(burst=True, count=b.count if first else b.suppressed, window_s=
                    self.burst_window_s, users=list(b.users)[:20], success=False)
        if b.hosts:
            meta["remote_hosts"] = list(b.hosts)[:20]
        if key != "*" and key.startswith("host "):
            meta["remote_host"] = key.removeprefix("host ")
        elif key != "*":
            meta["user"] = key.removeprefix("user ")
        return self.ctx.event(self.source, "security", sub, summary, detail=detail,
                              severity=Severity.ERROR, tags=["security", "auth", "burst"],
                              service=services or None, **meta)

    def event(self, rec: AuthRecord, message: str, ident: str, extra: dict[str, Any], *,
               via: str | None = None) -> MemoryEvent:
        command = scrub_command_text(rec.command, self.max_command_chars) \
            if rec.command else None
        tty = f" on {rec.tty}" if rec.tty else ""
        frm = f" from {rec.remote_host}" if rec.remote_host else ""
        by = f" by {rec.by}" + (f" (via {via})" if via else "") if rec.by else ""
        summary, sev = _summary(rec, message, ident, command, tty, frm, by)
        success = not rec.failure
        lines = [message[:4000] if not command else
                 message[:4000].replace(rec.command or "", command)]
        for label, value in (("user", rec.user), ("target user", rec.target),
                             ("group", rec.group), ("command", command), ("tty", rec.tty),
                             ("working directory", rec.cwd), ("remote host", rec.remote_host),
                             ("service", rec.service), ("reason", rec.reason),
                             ("attempts", rec.attempts), ("by", rec.by), ("attributed via", via),
                             ("success", success)):
            if value is not None:
                lines.append(f"{label}: {value}")
        lines += [f"{key}: {value}" for key, value in rec.details.items()]
        lines.append(f"identifier: {ident}")
        meta: dict[str, Any] = {"identifier": ident, "success": success, **extra}
        for key, value in (("user", rec.user), ("target_user", rec.target),
                           ("group", rec.group), ("command", command), ("tty", rec.tty),
                           ("cwd", rec.cwd), ("remote_host", rec.remote_host),
                           ("reason", rec.reason), ("attempts", rec.attempts),
                           ("by_user", rec.by), ("attributed_via", via)):
            if value is not None:
                meta[key] = value
        for key, value in rec.details.items():
            meta.setdefault(key, value)
        k = rec.kind
        if k == "group_membership" and rec.group in PRIVILEGED_GROUPS:
            meta["privileged_group"] = True
        tags = ["security", k] + (["failure"] if rec.failure else []) + (
            [rec.service] if rec.service else [])
        return self.ctx.event(self.source, "security", k, summary, detail="\n".join(lines),
                              severity=sev, actor=rec.user or rec.by or "system",
                              service=rec.service, tags=tags, **meta)




def _summary(rec: AuthRecord, message: str, ident: str, command: str | None, tty: str,
             frm: str, by: str) -> tuple[str, Severity]:
    """The one line an event of this record says, and its severity."""
    if rec.kind in _LOGIN_KINDS:
        return _login_summary(rec, ident, command, tty, frm)
    if rec.kind in _ACCOUNT_SUMMARIES:
        return _ACCOUNT_SUMMARIES[rec.kind](rec, rec.target or "?", by)
    return f"{ident}: {message[:300]}", Severity.WARNING  # pragma: no cover - every kind is above


_LOGIN_KINDS = frozenset({"sudo", "sudo_failure", "su", "su_failure", "auth_failure",
                          "account_locked"})


def _login_summary(rec: AuthRecord, ident: str, command: str | None, tty: str,
                   frm: str) -> tuple[str, Severity]:
    """sudo, su and logins, succeeded or failed."""
    user, target, k = rec.user or "an unknown user", rec.target or "?", rec.kind
    if k == "sudo":
        tool = rec.service or "sudo"
        return f"{user} ran a command as {target} with {tool}{tty}: {command}", Severity.INFO
    if k == "sudo_failure":
        tool = rec.service or "sudo"
        reason = rec.reason or "refused"
        verb = "refused" if "NOT" in reason or "not allowed" in reason else "failed"
        return (f"{tool} {verb} for {user}: {reason} (to run as {target}{tty})"
                + (f": {command}" if command else "")), Severity.WARNING
    if k == "su":
        return f"{user} switched to user {target} with su{tty}", Severity.INFO
    if k == "su_failure":
        return (f"su failed: {user} could not switch to user {target}{tty} "
                f"({rec.reason or 'authentication failure'})"), Severity.WARNING
    if k == "account_locked":
        return (f"Account {user} locked after too many failed logins ({rec.service})",
                Severity.ERROR)
    svc = rec.service or ident  # auth_failure
    d = rec.details
    if svc == "sshd":
        nouser = " (no such user)" if d.get("invalid_user") else ""
        return (f"Failed SSH login for {user}{nouser}{frm} ({d.get('method')})",
                Severity.WARNING)
    if svc == "polkit":
        return f"Failed authentication of {user} in polkit: {rec.reason}", Severity.WARNING
    return (f"Failed login (authentication failure) for {user} via {svc}"
            f"{tty}{frm}" + (f": {rec.reason}" if rec.reason and
                             rec.reason.lower() != "authentication failure"
                             else "")), Severity.WARNING


def _user_added(rec: AuthRecord, target: str, by: str) -> tuple[str, Severity]:
    d = rec.details
    parts = [f"{n} {d[key]}" for n, key in (("UID", "uid"), ("GID", "gid"),
                                             ("home", "home"), ("shell", "shell"))
             if key in d]
    return f"New user account {target} added" + (
        f" ({', '.join(parts)})" if parts else "") + by, Severity.WARNING


def _group_added(rec: AuthRecord, target: str, by: str) -> tuple[str, Severity]:
    gid = f" (GID {rec.details['gid']})" if "gid" in rec.details else ""
    return f"New group {rec.group} added{gid}{by}", Severity.WARNING


def _group_membership(rec: AuthRecord, target: str, by: str) -> tuple[str, Severity]:
    admin = " (an administrative group)" if rec.group in PRIVILEGED_GROUPS else ""
    action = rec.details.get("action")
    if action == "set":
        return (f"Members of group {rec.group}{admin} set to {rec.details.get('members')}{by}",
                Severity.WARNING)
    word = "added to" if action == "added" else "removed from"
    return f"User {target} {word} group {rec.group}{admin}{by}", Severity.WARNING


#: Account changes: kind → (record, target user, " by …") → (summary, severity).
_ACCOUNT_SUMMARIES: dict[str, Callable[[AuthRecord, str, str], tuple[str, Severity]]] = {
    "user_added": _user_added,
    "user_removed": lambda rec, target, by: (f"User account {target} removed{by}",
                                             Severity.WARNING),
    "user_modified": lambda rec, target, by: (
        f"User account {target} changed: {rec.details.get('change', 'modified')}{by}",
        Severity.WARNING),
    "group_added": _group_added,
    "group_removed": lambda rec, target, by: (f"Group {rec.group} removed{by}",
                                              Severity.WARNING),
    "group_modified": lambda rec, target, by: (
        f"Group changed: {rec.details.get('change', '')}{by}", Severity.WARNING),
    "group_membership": _group_membership,
    "password_change": lambda rec, target, by: (
        f"Password of user {target} changed{by}",
        Severity.WARNING if target == "root" else Severity.INFO),
}
