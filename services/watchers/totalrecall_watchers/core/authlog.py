"""Auth log lines → security records: sudo, su, pkexec, PAM and sshd failures, users and groups.

Pure: `classify(ident, message)` reads one line as its program wrote it (journald's `MESSAGE`
with its `SYSLOG_IDENTIFIER`, or a `/var/log/auth.log` / `/var/log/secure` line's message and
identifier) and returns an `AuthRecord`, or None when the line is none of these. A record whose
`kind` is empty is a companion line (`pam_unix(sudo:auth): authentication failure` before sudo's
own `3 incorrect password attempts`, useradd's `add 'bob' to shadow group 'sudo'` after
`add 'bob' to group 'sudo'`): it is claimed (the journal watcher does not report it as an error
too) but not reported, because the program's own line says it with more.

The formats are the ones the tools write on Debian, Ubuntu, Fedora/RHEL, Arch and NixOS:
sudo 1.8/1.9, util-linux and shadow su, shadow-utils (useradd, usermod, userdel, groupadd,
groupdel, groupmod, gpasswd, passwd, chage, chsh), Linux-PAM modules (pam_unix, pam_sss,
pam_faillock, pam_tally2), OpenSSH's sshd, shadow and util-linux login, polkit's pkexec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

#: Services whose own line follows their PAM failure line (and says more: the command, the
#: target account, the port): their `pam_*(svc:auth): authentication failure` is a companion.
OWN_FAILURE_LINE = frozenset({"sudo", "su", "su-l", "sshd", "login"})
#: Programs that manage accounts (their lines are read only from them: the messages are short).
ACCOUNT_TOOLS = frozenset({"useradd", "usermod", "userdel", "groupadd", "groupdel", "groupmod",
                           "gpasswd", "passwd", "chpasswd", "chage", "chsh", "chfn", "newusers",
                           "adduser", "deluser", "addgroup", "delgroup", "grpconv", "pwconv"})
FAILURE_KINDS = frozenset({"sudo_failure", "su_failure", "auth_failure", "account_locked"})


@dataclass
class AuthRecord:
    """What one auth line says. `user`: who acted or whose authentication failed; `target`:
    the account acted upon (sudo's `USER=`, su's `(to root)`, the new user, the member)."""

    kind: str
    user: str | None = None
    target: str | None = None
    command: str | None = None
    tty: str | None = None
    remote_host: str | None = None
    service: str | None = None
    reason: str | None = None
    group: str | None = None
    cwd: str | None = None
    by: str | None = None
    attempts: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def failure(self) -> bool:
        return self.kind in FAILURE_KINDS


def _clean(v: str | None) -> str | None:
    v = (v or "").strip()
    return v or None


def _tty(v: str | None) -> str | None:
    v = _clean(v)
    if v is None or v in ("unknown", "none", "(none)"):
        return None
    if v.startswith("NODEV"):  # sshd's PAM_TTY "NODEVssh"
        return v[5:] or None
    return v.removeprefix("/dev/")


def _kv(text: str) -> dict[str, str]:
    """`logname= uid=1000 euid=0 tty=/dev/pts/0 ruser=alice rhost=  user=alice` → a dict
    (empty values dropped)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(\w+)=(\S*)", text):
        if m.group(2):
            out[m.group(1)] = m.group(2)
    return out


# --- sudo ---------------------------------------------------------------------------------
_SUDO = re.compile(r"^\s*(?P<user>[^\s:]+) : (?P<rest>.*)$", re.S)
_SUDO_FIELD = re.compile(r"^(TTY|PWD|USER|GROUP|ENV|CHROOT|CWD|RUNCWD|TSID|HOST)=(.*)$", re.S)
_ATTEMPTS = re.compile(r"^(\d+) incorrect password attempts?$")


def _sudo(message: str) -> AuthRecord | None:
    if message.startswith("(command continued)"):
        return AuthRecord("")  # the rest of a long COMMAND=, split by sudo into more lines
    m = _SUDO.match(message)
    if not m:
        return None
    rest = m.group("rest")
    command = None
    cut = rest.find("COMMAND=")
    if cut >= 0 and (cut == 0 or rest[:cut].endswith("; ")):
        command = rest[cut + len("COMMAND="):]
        rest = rest[:cut].rstrip("; ").rstrip()
    fields: dict[str, str] = {}
    reason = None
    for i, part in enumerate(p.strip() for p in rest.split(" ; ")):
        fm = _SUDO_FIELD.match(part)
        if fm:
            fields[fm.group(1)] = fm.group(2)
        elif i == 0 and part:
            reason = part
    if command is None and not fields:
        return None  # "alice : something" that is not sudo's log format
    rec = AuthRecord("sudo", user=m.group("user"), target=fields.get("USER", "root"),
                     command=command, tty=_tty(fields.get("TTY")), cwd=fields.get("PWD"),
                     service="sudo", reason=reason)
    if fields.get("GROUP"):
        rec.details["target_group"] = fields["GROUP"]
    if fields.get("ENV"):
        rec.details["env"] = fields["ENV"]
    if reason is not None:
        rec.kind = "sudo_failure"
        am = _ATTEMPTS.match(reason)
        if am:
            rec.attempts = int(am.group(1))
    return rec


# --- su -----------------------------------------------------------------------------------
_SU_OK = re.compile(r"^\(to (?P<target>\S+)\) (?P<user>\S+) on (?P<tty>\S+)$")
_SU_FAIL = re.compile(r"^FAILED SU \(to (?P<target>\S+)\) (?P<user>\S+) on (?P<tty>\S+)$")
_SU_SHADOW = re.compile(r"^(?P<ok>Successful|FAILED) su for (?P<target>\S+) by (?P<user>\S+)$")
_SU_SHADOW_TTY = re.compile(r"^[+-] (?P<tty>\S+) (?P<user>[^\s:]+):(?P<target>\S+)$")


def _su(message: str) -> AuthRecord | None:
    for pattern, kind in ((_SU_OK, "su"), (_SU_FAIL, "su_failure")):
        m = pattern.match(message)
        if m:
            return AuthRecord(kind, user=m.group("user"), target=m.group("target"),
                              tty=_tty(m.group("tty")), service="su",
                              reason="authentication failure" if kind == "su_failure" else None)
    m = _SU_SHADOW.match(message)
    if m:
        ok = m.group("ok") == "Successful"
        return AuthRecord("su" if ok else "su_failure", user=m.group("user"),
                          target=m.group("target"), service="su",
                          reason=None if ok else "authentication failure")
    if _SU_SHADOW_TTY.match(message):
        return AuthRecord("")  # shadow su's "+ pts/1 alice:root", after its Successful line
    return None


# --- PAM ----------------------------------------------------------------------------------
_PAM = re.compile(r"^(?P<module>pam_[\w-]+)\((?P<svc>[^:)]+):(?P<type>\w+)\):?\s*(?P<msg>.*)$",
                  re.S)
_PAM_LOCKED = re.compile(r"(?i)consecutive login failures for user (?P<user>\S+) account "
                         r"temporarily locked|user (?P<user2>\S+) \(\d+\) tally \d+, deny \d+")
_PAM_COMPANION = re.compile(r"(?i)^(?:check pass; user unknown|conversation failed|auth could not "
                            r"identify password|authentication failure$)")
_PAM_MORE = re.compile(r"^PAM \d+ more authentication failures?;")


def _pam(message: str) -> AuthRecord | None:
    if _PAM_MORE.match(message):
        return AuthRecord("")  # sshd's "PAM 2 more authentication failures": its lines said it
    m = _PAM.match(message)
    if not m:
        return None
    svc, ptype, msg = m.group("svc"), m.group("type"), m.group("msg")
    if ptype == "chauthtok":
        pm = re.match(r"(?i)password changed for (\S+)", msg)
        if pm:
            return AuthRecord("password_change", target=pm.group(1), service=svc)
        return None
    if ptype not in ("auth", "account"):
        return None
    locked = _PAM_LOCKED.search(msg)
    if locked:
        return AuthRecord("account_locked", user=locked.group("user") or locked.group("user2"),
                          service=svc, reason="too many failed logins")
    if msg.startswith("authentication failure;"):
        kv = _kv(msg.split(";", 1)[1])
        user = kv.get("user") or kv.get("ruser") or kv.get("logname")
        if svc in OWN_FAILURE_LINE:
            return AuthRecord("")
        rec = AuthRecord("auth_failure", user=user, tty=_tty(kv.get("tty")),
                         remote_host=kv.get("rhost"), service=svc,
                         reason="authentication failure")
        for k in ("logname", "uid", "ruser"):
            if kv.get(k):
                rec.details[k] = kv[k]
        return rec
    if _PAM_COMPANION.match(msg) or "authentication failure" in msg:
        return AuthRecord("")
    return None


# --- sshd, login, pkexec, polkit -----------------------------------------------------------
_SSHD_FAIL = re.compile(r"^Failed (?P<method>\S+) for (?P<invalid>invalid user )?(?P<user>.*?) "
                        r"from (?P<host>\S+) port (?P<port>\d+)")
_LOGIN_FAIL = re.compile(r"^FAILED LOGIN \(?(?P<n>\d+)\)? (?:on|FROM) '?(?P<tty>[^' ]+)'? "
                         r"FOR '?(?P<user>[^',]+)'?,\s*(?P<reason>.*)$")
_PKEXEC = re.compile(r"^(?P<user>[^\s:]+): (?P<what>Executing command|Error executing command as "
                     r"another user: (?P<reason>[^\[]+?)) \[USER=(?P<target>[^\]]*)\] "
                     r"\[TTY=(?P<tty>[^\]]*)\] \[CWD=(?P<cwd>[^\]]*)\] \[COMMAND=(?P<cmd>.*)\]$",
                     re.S)
_POLKIT_FAIL = re.compile(r"^Operator of (?P<subject>\S+) FAILED to authenticate to gain "
                          r"authorization for action (?P<action>\S+) .*?\(owned by "
                          r"unix-user:(?P<user>[^)]+)\)")


def _sshd(message: str) -> AuthRecord | None:
    m = _SSHD_FAIL.match(message)
    if not m:
        return None
    invalid = bool(m.group("invalid"))
    rec = AuthRecord("auth_failure", user=m.group("user") or None, remote_host=m.group("host"),
                     service="sshd", reason=f"failed {m.group('method')}"
                     + (", no such user" if invalid else ""))
    rec.details["method"] = m.group("method")
    rec.details["port"] = int(m.group("port"))
    if invalid:
        rec.details["invalid_user"] = True
    return rec


# --- accounts -----------------------------------------------------------------------------
_NEW_USER = re.compile(r"^new user: (?P<kv>.*)$")
_NEW_GROUP = re.compile(r"^new group: name=(?P<group>[^,\s]+),\s*GID=(?P<gid>\d+)")
_ADD_MEMBER = re.compile(r"^add '(?P<user>[^']+)' to (?P<shadow>shadow )?group '(?P<group>[^']+)'")
_DEL_MEMBER = re.compile(r"^delete '(?P<user>[^']+)' from (?P<shadow>shadow )?group "
                         r"'(?P<group>[^']+)'")
_DEL_USER = re.compile(r"^delete user '(?P<user>[^']+)'")
_GROUP_REMOVED = re.compile(r"^group '(?P<group>[^']+)' removed(?P<from> from \S+)?$")
_GPASSWD = re.compile(r"^user (?P<user>\S+) (?P<act>added|removed) by (?P<by>\S+) (?:to|from) "
                      r"group (?P<group>\S+)")
_GPASSWD_SET = re.compile(r"^members of group (?P<group>\S+) set by (?P<by>\S+) to (?P<m>.*)$")
_USER_CHANGE = re.compile(r"^(?P<verb>change|lock|unlock) user (?:name )?'(?P<user>[^']+)'"
                          r"(?P<rest>.*)$")
_PASSWD_BY = re.compile(r"^password for '(?P<user>[^']+)' changed by '(?P<by>[^']+)'")
_CHAGE = re.compile(r"^changed password expiry for (?P<user>\S+)")
_CHSH = re.compile(r"^changed user '(?P<user>[^']+)' shell to '(?P<shell>[^']*)'")
_GROUP_CHANGED = re.compile(r"^group changed in \S+ \((?P<what>.*)\)$")
_COMPANIONS = re.compile(r"^(?:group added to /etc/|removed (?:shadow )?group '|group '[^']+' "
                         r"removed from /etc/)")


def _accounts(ident: str, message: str) -> AuthRecord | None:
    """An account tool's line (useradd, usermod, groupadd, gpasswd, passwd, chage, …) → a
    record; the first family whose patterns match says (in this order)."""
    for family in (_new_user, _group_lines, _removals, _user_changes):
        rec = family(ident, message)
        if rec is not None:
            return rec
    return None


def _new_user(ident: str, message: str) -> AuthRecord | None:
    m = _NEW_USER.match(message)
    if not m:
        return None
    kv = {k.lower(): v for k, v in re.findall(r"(\w+)=([^,]*)", m.group("kv"))}
    rec = AuthRecord("user_added", target=kv.get("name"), service=ident)
    for k in ("uid", "gid"):
        if kv.get(k, "").isdigit():
            rec.details[k] = int(kv[k])
    for k in ("home", "shell"):
        if kv.get(k):
            rec.details[k] = kv[k]
    if kv.get("from") and kv["from"] != "none":
        rec.tty = _tty(kv["from"])
    return rec


def _group_lines(ident: str, message: str) -> AuthRecord | None:
    """A new group, and members added to or removed from one."""
    m = _NEW_GROUP.match(message)
    if m:
        if ident == "useradd":  # the new user's own group: said by its user_added event (GID)
            return AuthRecord("")
        return AuthRecord("group_added", group=m.group("group"), service=ident,
                          details={"gid": int(m.group("gid"))})
    for pattern, action in ((_ADD_MEMBER, "added"), (_DEL_MEMBER, "removed")):
        m = pattern.match(message)
        if m:
            if m.group("shadow") or (action == "removed" and ident == "userdel"):
                return AuthRecord("")  # the gshadow copy; a deleted user leaving its groups
            return AuthRecord("group_membership", target=m.group("user"), group=m.group("group"),
                              service=ident, details={"action": action})
    m = _GPASSWD.match(message)
    if m:
        return AuthRecord("group_membership", target=m.group("user"), group=m.group("group"),
                          by=m.group("by"), service=ident, details={"action": m.group("act")})
    m = _GPASSWD_SET.match(message)
    if m:
        return AuthRecord("group_membership", group=m.group("group"), by=m.group("by"),
                          service=ident, details={"action": "set", "members": m.group("m")})
    return None


def _removals(ident: str, message: str) -> AuthRecord | None:
    """A user or group removed, a password changed by someone, and the lines that only echo
    another one (companions)."""
    m = _DEL_USER.match(message)
    if m:
        return AuthRecord("user_removed", target=m.group("user"), service=ident)
    m = _GROUP_REMOVED.match(message)
    if m:
        if m.group("from"):
            return AuthRecord("")
        return AuthRecord("group_removed", group=m.group("group"), service=ident)
    m = _PASSWD_BY.match(message)
    if m:
        return AuthRecord("password_change", target=m.group("user"), by=m.group("by"),
                          service=ident)
    if _COMPANIONS.match(message):
        return AuthRecord("")
    return None


def _user_changes(ident: str, message: str) -> AuthRecord | None:
    """A user or group changed: renamed, locked, its password, expiry or shell."""
    m = _USER_CHANGE.match(message)
    if m:
        rest = m.group("rest").strip()
        if m.group("verb") == "change" and rest == "password":  # usermod -p
            return AuthRecord("password_change", target=m.group("user"), service=ident)
        if message.startswith("change user name "):
            change = f"renamed to {rest.removeprefix('to ')}"
        else:
            change = f"{m.group('verb')} {rest}".strip()
        return AuthRecord("user_modified", target=m.group("user"), service=ident,
                          details={"change": change})
    m = _CHAGE.match(message)
    if m:
        return AuthRecord("user_modified", target=m.group("user"), service=ident,
                          details={"change": "password expiry"})
    m = _CHSH.match(message)
    if m:
        return AuthRecord("user_modified", target=m.group("user"), service=ident,
                          details={"change": f"shell to '{m.group('shell')}'"})
    m = _GROUP_CHANGED.match(message)
    if m:
        return AuthRecord("group_modified", service=ident, details={"change": m.group("what")})
    return None


def classify(ident: str, message: str) -> AuthRecord | None:
    """One auth line → a record, an empty-kind companion record, or None (not an auth line)."""
    message = message.strip("\r\n")
    if not message:
        return None
    ident = ident.strip().rstrip("]").split("[")[0] if ident else ""
    if message.startswith(("pam_", "PAM ")):
        return _pam(message)
    if ident == "sudo":
        return _sudo(message)
    if ident in ("su", "su-l"):
        return _su(message)
    if ident in ACCOUNT_TOOLS:
        return _accounts(ident, message)
    if ident.startswith("sshd"):  # sshd, sshd-session (OpenSSH 9.8+)
        return _sshd(message)
    if ident == "login":
        m = _LOGIN_FAIL.match(message)
        if m:
            return AuthRecord("auth_failure", user=m.group("user"), tty=_tty(m.group("tty")),
                              service="login", reason=m.group("reason").strip() or None,
                              attempts=int(m.group("n")))
        return None
    if ident == "pkexec":
        m = _PKEXEC.match(message)
        if m:
            reason = _clean(m.group("reason"))
            return AuthRecord("sudo_failure" if reason else "sudo", user=m.group("user"),
                              target=m.group("target") or "root", command=m.group("cmd"),
                              tty=_tty(m.group("tty")), cwd=_clean(m.group("cwd")),
                              service="pkexec", reason=reason)
        return None
    if ident in ("polkitd", "polkit-agent-helper-1"):
        m = _POLKIT_FAIL.match(message)
        if m:
            return AuthRecord("auth_failure", user=m.group("user"), service="polkit",
                              reason=f"failed to authenticate for {m.group('action')}")
    return None
