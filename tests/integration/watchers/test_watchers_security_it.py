"""Security and network events on the real stream.

* The auth log: real tools (groupadd, useradd, usermod, chpasswd, su through the real PAM stack
  as `nobody` on a pseudo-terminal, sudo) log through syslog(3) to `/dev/log`, where this test
  stands in for rsyslog (a datagram socket writing the lines it gets into an auth.log of its
  own, as rsyslog writes them) — root only. Where a syslog daemon owns `/dev/log`, the tools run
  in a mount namespace of their own with this test's socket mounted over it: the daemon neither
  loses its socket nor gets the test's lines.
  Everywhere: lines these tools wrote, appended to a tailed auth log, with the journal watcher
  tailing the same file and leaving them to the security watcher.
* Ports: a socket this test opens on a free port is reported with this process's name, and
  again when it is closed.
* The firewall: a table (nft) or chain (iptables) of this test's own name, with a rule, added
  and removed — root only, with nft or iptables.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from totalrecall.infra import free_port
from totalrecall_schema import MemoryEvent, Severity, Topology
from watchers_it_helpers import StreamReader, make_settings, running, wait_until


def meta(e: MemoryEvent) -> dict:
    return e.metadata.model_extra or {}


def fast(settings) -> None:  # type: ignore[no-untyped-def]
    """No rate limit in the way: the test's events among whatever else this machine does."""
    rl = settings.rate_limit
    rl.per_watcher_burst = rl.global_burst = 10_000
    rl.per_watcher_per_hour = rl.global_per_hour = 100_000


# --- the auth log -------------------------------------------------------------------------

class SyslogReceiver:
    """What rsyslog does with the auth lines, reduced: `/dev/log` datagrams → BSD lines.

    Bound at `/dev/log` where nothing owns it; else at a socket of its own, which `wrap` mounts
    over `/dev/log` in a private mount namespace for each command it prefixes."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.path = "/dev/log"
        self.wrap: list[str] = []
        if os.path.exists("/dev/log"):
            # short: a socket's path must fit in 108 bytes
            self.path = os.path.join(tempfile.mkdtemp(prefix="trlog", dir="/tmp"), "log")
            self.wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                         'mount --bind "$0" /dev/log && exec "$@"', self.path]
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o666)  # su and sudo log after dropping to the user's uid too
        self.sock.settimeout(0.1)
        self.stop = False
        self.host = socket.gethostname().split(".")[0]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with self.out.open("a") as f:
            while not self.stop:
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                m = re.match(r"^<\d+>(\w{3} [ \d]\d \d\d:\d\d:\d\d) (.*)$",
                             data.decode("utf-8", "replace").rstrip("\n\x00"), re.S)
                if m:
                    f.write(f"{m.group(1)} {self.host} {m.group(2)}\n")
                    f.flush()

    def close(self) -> None:
        self.stop = True
        self.thread.join(5)
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self.wrap:
            shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


def _can_stand_in_for_syslog() -> str | None:
    if os.geteuid() != 0:
        return "needs root (creates /dev/log, users and groups)"
    tools = ["groupadd", "useradd", "usermod", "userdel", "groupdel", "chpasswd", "su", "setpriv"]
    if os.path.exists("/dev/log"):  # a syslog daemon's: the tools log in a namespace of their own
        tools += ["unshare", "mount"]
    missing = [t for t in tools if shutil.which(t) is None]
    return f"missing {', '.join(missing)}" if missing else None


def su_as_nobody_with_a_wrong_password(wrap: list[str]) -> bytes:
    """`su root` as nobody on a pseudo-terminal, the wrong password typed: PAM refuses."""
    argv = [*wrap, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            "su", "root", "-c", "true"]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execvp(argv[0], argv)
    out, sent, deadline = b"", False, time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(fd, 1000)
            except OSError:
                break
            if not data:
                break
            out += data
            if b"assword" in out and not sent:
                os.write(fd, b"not-the-password\n")
                sent = True
    finally:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os.close(fd)
    return out


@contextlib.contextmanager
def account_names() -> Iterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:6]
    user, group = f"trtu{tag}", f"trtg{tag}"
    try:
        yield user, group
    finally:
        subprocess.run(["userdel", user], capture_output=True, check=False)
        subprocess.run(["groupdel", group], capture_output=True, check=False)


async def test_real_tools_through_pam_and_syslog(nats_url: str, topology: Topology,
                                                 tr_home: Path, tmp_path: Path,
                                                 reader: StreamReader) -> None:
    why = _can_stand_in_for_syslog()
    if why:
        pytest.skip(why)
    auth_log = tmp_path / "auth.log"
    auth_log.touch()
    settings = make_settings(nats_url, topology, tr_home, enable=("security",))
    fast(settings)
    settings.security.journald = False
    settings.security.log_files = [str(auth_log)]
    settings.security.log_poll_s = 0.1
    receiver = SyslogReceiver(auth_log)

    def run(*argv: str, **kw) -> None:  # type: ignore[no-untyped-def]
        subprocess.run([*receiver.wrap, *argv], check=True, timeout=60, capture_output=True, **kw)

    try:
        with account_names() as (user, group):
            async with running(settings) as app:
                runner = app.state.runner
                await wait_until(lambda: runner.status["security"].state == "running", 10,
                                 "the security watcher")
                run("groupadd", group)
                run("useradd", "-M", "-s", "/usr/sbin/nologin", "-G", group, user)
                run("usermod", "-aG", "users", user)
                run("chpasswd", input=f"{user}:Not-A-Real-Pw-1\n".encode())
                assert b"Authentication failure" in su_as_nobody_with_a_wrong_password(
                    receiver.wrap)
                sudo = shutil.which("sudo") is not None
                if sudo:  # nobody is in no sudoers file; root runs a command as nobody
                    subprocess.run([*receiver.wrap, "setpriv", "--reuid=65534", "--regid=65534",
                                    "--clear-groups", "sh", "-c", "echo wrong | sudo -S true"],
                                   capture_output=True, timeout=60, check=False)
                    run("sudo", "-u", "nobody", "/usr/bin/env", "API_TOKEN=tok3nSecret",
                        "/bin/true", "--password=hunter2pw")
                run("userdel", user)
                run("groupdel", group)

                def find(sub: str, pred=lambda e: True):  # type: ignore[no-untyped-def]
                    return reader.wait_for(lambda e: e.category == "security"
                                           and e.subcategory == sub and pred(e), 30, sub)

                ev, _ = await find("group_added", lambda e: meta(e).get("group") == group)
                assert ev.summary.startswith(f"New group {group} added (GID ")
                ev, _ = await find("user_added", lambda e: meta(e).get("target_user") == user)
                assert ev.severity == Severity.WARNING and "shell /usr/sbin/nologin" in ev.summary
                assert isinstance(meta(ev)["uid"], int) and meta(ev)["log_file"] == str(auth_log)
                ev, _ = await find("group_membership", lambda e: meta(e).get("group") == "users")
                assert ev.summary == f"User {user} added to group users"
                await find("group_membership", lambda e: meta(e).get("group") == group)
                await find("password_change", lambda e: meta(e).get("target_user") == user)
                ev, _ = await find("su_failure", lambda e: meta(e).get("user") == "nobody")
                assert ev.summary.startswith("su failed: nobody could not switch to user root on")
                if sudo:
                    ev, _ = await find("sudo_failure", lambda e: meta(e).get("user") == "nobody")
                    assert "user NOT in sudoers" in ev.summary
                    ev, _ = await find("sudo", lambda e: meta(e).get("target_user") == "nobody")
                    assert ev.summary.startswith("root ran a command as nobody with sudo")
                    assert "tok3nSecret" not in ev.model_dump_json()
                    assert "hunter2pw" not in ev.model_dump_json()
                await find("user_removed", lambda e: meta(e).get("target_user") == user)
                await find("group_removed", lambda e: meta(e).get("group") == group)
                # su's PAM line, useradd's shadow-group lines: companions, never events
                assert runner.watchers[0].parser.companions >= 2
    finally:
        receiver.close()
    lines = auth_log.read_text()
    assert "pam_unix(su:auth): authentication failure" in lines  # the real PAM stack said it


REAL_LINES = """\
{t} {h} groupadd[25380]: group added to /etc/group: name={g}, GID=1001
{t} {h} groupadd[25380]: new group: name={g}, GID=1001
{t} {h} sudo:    alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/usr/sbin/useradd -m -G {g} {u}
{t} {h} useradd[25386]: new group: name={u}, GID=1002
{t} {h} useradd[25386]: new user: name={u}, UID=1001, GID=1002, home=/home/{u}, shell=/bin/bash, from=/dev/pts/0
{t} {h} useradd[25386]: add '{u}' to group '{g}'
{t} {h} useradd[25386]: add '{u}' to shadow group '{g}'
{t} {h} sudo: pam_unix(sudo:auth): authentication failure; logname= uid=1001 euid=0 tty=/dev/pts/1 ruser={u} rhost=  user={u}
{t} {h} sudo: pam_unix(sudo:auth): conversation failed
{t} {h} sudo: {u} : 3 incorrect password attempts ; TTY=pts/1 ; PWD=/tmp ; USER=root ; COMMAND=/usr/bin/mysql -u root -pS3cretPw
{t} {h} sudo:    alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; COMMAND=/usr/bin/curl -u admin:Tr0ub4dor https://example.com
{t} {h} su: pam_unix(su:auth): authentication failure; logname= uid=1001 euid=0 tty=/dev/pts/1 ruser={u} rhost=  user=root
{t} {h} su[25410]: FAILED SU (to root) {u} on pts/1
{t} {h} sshd[900]: Failed password for invalid user admin from 203.0.113.7 port 50022 ssh2
{t} {h} sshd[900]: error: kex_exchange_identification: Connection closed by remote host
"""


async def test_real_format_lines_in_a_tailed_auth_log(nats_url: str, topology: Topology,
                                                      tr_home: Path, tmp_path: Path,
                                                      reader: StreamReader) -> None:
    auth_log = tmp_path / "auth.log"
    auth_log.write_text("Nov 29 06:00:00 box su[1]: (to root) history on pts/9\n")
    settings = make_settings(nats_url, topology, tr_home, enable=("security", "journal"))
    fast(settings)
    for s in (settings.security, settings.journal):
        s.journald = False
        s.log_poll_s = 0.1
    settings.security.log_files = [str(auth_log)]
    settings.journal.syslog_files = [str(auth_log)]  # the journal watcher reads it too
    tag = uuid.uuid4().hex[:6]
    user, group = f"trtu{tag}", f"trtg{tag}"
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["security"].state == "running"
                         and runner.status["journal"].state == "running", 10, "both watchers")
        stamp = time.strftime("%b %e %H:%M:%S")
        with auth_log.open("a") as f:
            f.write(REAL_LINES.format(t=stamp, h=socket.gethostname().split(".")[0], u=user,
                                      g=group))
        ev, _ = await reader.wait_for(lambda e: e.category == "error" and "kex_" in e.summary,
                                      20, "the journal watcher's sshd error")
        ev, _ = await reader.wait_for(lambda e: e.subcategory == "su_failure"
                                      and meta(e).get("user") == user, 20, "su failure")
        ev, _ = await reader.wait_for(lambda e: e.subcategory == "auth_failure"
                                      and meta(e).get("remote_host") == "203.0.113.7", 20, "ssh")
        assert ev.summary == "Failed SSH login for admin (no such user) from 203.0.113.7 (password)"
        events = [e for e in await reader.events() if e.category == "security"]
    by_sub = {}
    for e in events:
        by_sub.setdefault(e.subcategory, []).append(e)
    assert sorted(by_sub) == ["auth_failure", "group_added", "group_membership", "su_failure",
                              "sudo", "sudo_failure", "user_added"], [e.summary for e in events]
    (added,) = by_sub["user_added"]
    assert added.summary == (f"New user account {user} added (UID 1001, GID 1002, home /home/"
                             f"{user}, shell /bin/bash) by alice (via sudo)")
    (failed,) = by_sub["sudo_failure"]
    assert failed.summary == (f"sudo failed for {user}: 3 incorrect password attempts (to run as "
                              "root on pts/1): /usr/bin/mysql -u root -p[REDACTED]")
    assert [e.summary for e in by_sub["sudo"]][1] == (
        "alice ran a command as root with sudo on pts/0: /usr/bin/curl -u admin:[REDACTED] "
        "https://example.com")
    published = "".join(e.model_dump_json() for e in await reader.events())
    assert "S3cretPw" not in published and "Tr0ub4dor" not in published
    # the journal watcher left the auth lines to the security watcher
    errors = [e.summary for e in await reader.events() if e.category == "error"]
    assert errors and not any("incorrect password" in s or "FAILED SU" in s or "pam_unix" in s
                              for s in errors), errors
    assert runner.health()["journal"]["claimed"] >= 3
    assert "history" not in published


# --- listening ports ----------------------------------------------------------------------

async def test_a_port_this_test_opens_is_reported_with_its_process(
        nats_url: str, topology: Topology, tr_home: Path, reader: StreamReader) -> None:
    settings = make_settings(nats_url, topology, tr_home, enable=("ports",))
    fast(settings)
    settings.ports.interval_s = 0.3
    me = psutil.Process().name()
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["ports"].last_poll_at is not None, 10,
                         "the baseline poll")
        port = free_port()
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen()
        try:
            ev, _ = await reader.wait_for(lambda e: e.subcategory == "listen"
                                          and meta(e).get("port") == port, 15, "the listen")
        finally:
            srv.close()
        assert ev.category == "system.network" and ev.severity == Severity.INFO
        assert meta(ev)["process"] == me and meta(ev)["pid"] == os.getpid()
        assert meta(ev)["addresses"] == ["127.0.0.1"] and meta(ev)["exposed"] is False
        assert ev.summary.startswith(f"Port {port}/tcp now listening on 127.0.0.1 (loopback "
                                     f"only) — {me} (PID {os.getpid()})")
        ev, _ = await reader.wait_for(lambda e: e.subcategory == "unlisten"
                                      and meta(e).get("port") == port, 15, "the unlisten")
        assert ev.summary == (f"Port {port}/tcp no longer listening (was {me} (PID "
                              f"{os.getpid()}), on 127.0.0.1)")


# --- the firewall -------------------------------------------------------------------------

def _firewall_tool() -> tuple[str | None, str]:
    if os.geteuid() != 0:
        return None, "needs root (CAP_NET_ADMIN) to change the firewall"
    if shutil.which("nft") and subprocess.run(["nft", "list", "tables"], capture_output=True,
                                              check=False).returncode == 0:
        return "nft", ""
    if shutil.which("iptables") and subprocess.run(["iptables-save"], capture_output=True,
                                                   check=False).returncode == 0:
        return "iptables", ""
    return None, "neither nft nor iptables works here"


async def test_a_rule_added_and_removed_is_reported(nats_url: str, topology: Topology,
                                                   tr_home: Path, reader: StreamReader) -> None:
    tool, why = _firewall_tool()
    if tool is None:
        pytest.skip(why)
    name = f"trtest_{uuid.uuid4().hex[:8]}"
    if tool == "nft":
        add = [["nft", "add", "table", "inet", name],
               ["nft", "add", "chain", "inet", name, "c"],
               ["nft", "add", "rule", "inet", name, "c", "ip", "saddr", "192.0.2.77", "drop"]]
        remove = [["nft", "delete", "table", "inet", name]]
    else:
        name = name.upper()
        add = [["iptables", "-N", name], ["iptables", "-A", name, "-s", "192.0.2.77", "-j", "DROP"]]
        remove = [["iptables", "-F", name], ["iptables", "-X", name]]
    settings = make_settings(nats_url, topology, tr_home, enable=("firewall",))
    fast(settings)
    settings.firewall.interval_s = 0.3
    if tool == "iptables":
        settings.firewall.tool = "iptables"

    def marked(rules: list[str]) -> bool:
        return any(name in r and "192.0.2.77" in r for r in rules)

    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["firewall"].last_poll_at is not None, 15,
                         "the baseline read")
        try:
            for cmd in add:
                subprocess.run(cmd, check=True, capture_output=True, timeout=30)
            ev, _ = await reader.wait_for(lambda e: e.subcategory == "firewall"
                                          and marked(meta(e).get("added_rules", [])), 15,
                                          "the rule added")
        finally:
            for cmd in remove:
                subprocess.run(cmd, check=False, capture_output=True, timeout=30)
        assert ev.category == "security" and ev.severity == Severity.WARNING
        assert meta(ev)["tool"] == tool and ev.summary.startswith(f"Firewall rules changed "
                                                                  f"({tool}): ")
        assert name in ev.summary
        ev, _ = await reader.wait_for(lambda e: e.subcategory == "firewall"
                                      and marked(meta(e).get("removed_rules", [])), 15,
                                      "the rule removed")
        assert meta(ev)["removed"] >= 1
