"""Security and network events: auth log lines in their real formats (sudo, su, PAM, sshd,
shadow-utils), bursts of failures, secrets in sudo command lines, listening ports, firewall
rulesets. The lines are the ones the tools wrote on a Debian 12 machine (sudo 1.9.13,
util-linux su, shadow 4.13, Linux-PAM 1.5) or copied from their sources' formats."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from totalrecall_schema import MemoryEvent, Severity
from totalrecall_watchers.adapters.firewall import FirewallWatcher
from totalrecall_watchers.adapters.security import SecurityWatcher
from totalrecall_watchers.adapters.users import uid_name
from totalrecall_watchers.core.authlog import classify
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.firewall import iptables_lines, nft_lines
from totalrecall_watchers.core.journal import JournalParser
from totalrecall_watchers.core.log_files import text_entry
from totalrecall_watchers.core.ports import Listener, PortsWatcher, Proc
from totalrecall_watchers.core.scrub import scrub_cmdline, scrub_command_text, scrub_extra
from totalrecall_watchers.core.security import SecurityParser, claims
from totalrecall_watchers.settings import FirewallSettings, PortsSettings, SecuritySettings


def ctx(clock: FakeClock | None = None) -> EventContext:
    return EventContext(hostname="box", clock=clock or FakeClock())


def parse_lines(p: SecurityParser, *lines: str) -> list[MemoryEvent]:
    out: list[MemoryEvent] = []
    for line in lines:
        entry = text_entry(line, "auth")
        assert entry is not None
        out += p.parse_entry(entry, log_file="/var/log/auth.log")
    return out


def one(p: SecurityParser, line: str) -> MemoryEvent:
    events = parse_lines(p, line)
    assert len(events) == 1, [e.summary for e in events]
    return events[0]


def meta(e: MemoryEvent) -> dict:
    return e.metadata.model_extra or {}


# --- the classifier -----------------------------------------------------------------------

def test_sudo_lines() -> None:
    r = classify("sudo", "    alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; "
                         "COMMAND=/usr/bin/apt install x")
    assert r is not None and r.kind == "sudo" and not r.failure
    assert (r.user, r.target, r.tty, r.cwd, r.command) == (
        "alice", "root", "pts/0", "/home/alice", "/usr/bin/apt install x")
    # no TTY field at all (sudo -S from a pipe), GROUP and ENV, a ';' inside the command
    r = classify("sudo", "trprobeu : PWD=/tmp ; USER=postgres ; GROUP=wheel ; ENV=A=1 ; "
                         "COMMAND=/bin/sh -c a ; b")
    assert r is not None and r.tty is None and r.target == "postgres"
    assert r.command == "/bin/sh -c a ; b" and r.details == {"target_group": "wheel", "env": "A=1"}
    r = classify("sudo", "trprobeu : 3 incorrect password attempts ; TTY=pts/0 ; PWD=/tmp ; "
                         "USER=root ; COMMAND=/usr/bin/true")
    assert r is not None and r.kind == "sudo_failure" and r.attempts == 3 and r.failure
    r = classify("sudo", "trprobeu : 1 incorrect password attempt ; PWD=/tmp ; USER=root ; "
                         "COMMAND=/usr/bin/true")
    assert r is not None and r.attempts == 1
    for reason in ("user NOT in sudoers", "a password is required", "command not allowed",
                   "user NOT authorized on host"):
        r = classify("sudo", f"  nobody : {reason} ; PWD=/tmp ; USER=root ; COMMAND=/usr/bin/id")
        assert r is not None and r.kind == "sudo_failure" and r.reason == reason
    assert classify("sudo", "(command continued) --more args").kind == ""  # type: ignore[union-attr]
    assert classify("sudo", "unable to resolve host box: Name or service not known") is None
    assert classify("sudo", "pam_unix(sudo:session): session opened for user root(uid=0) by "
                            "(uid=1000)") is None


def test_su_lines() -> None:
    r = classify("su", "(to root) alice on pts/1")
    assert r is not None and (r.kind, r.user, r.target, r.tty) == ("su", "alice", "root", "pts/1")
    r = classify("su", "FAILED SU (to root) nobody on pts/0")
    assert r is not None and (r.kind, r.user, r.target) == ("su_failure", "nobody", "root")
    r = classify("su", "FAILED su for root by alice")  # shadow su
    assert r is not None and r.kind == "su_failure" and r.user == "alice"
    assert classify("su", "Successful su for postgres by root").kind == "su"  # type: ignore[union-attr]
    assert classify("su", "+ pts/1 alice:root").kind == ""  # type: ignore[union-attr]


def test_pam_lines() -> None:
    line = ("pam_unix(gdm-password:auth): authentication failure; logname= uid=0 euid=0 "
            "tty=/dev/tty1 ruser= rhost=  user=alice")
    r = classify("gdm-password]", line)
    assert r is not None and (r.kind, r.user, r.service, r.tty) == (
        "auth_failure", "alice", "gdm-password", "tty1")
    r = classify("cockpit-session", "pam_unix(cockpit:auth): authentication failure; logname= "
                                    "uid=0 euid=0 tty= ruser= rhost=192.0.2.9  user=bob")
    assert r is not None and r.remote_host == "192.0.2.9" and r.user == "bob"
    # a service that says it again in its own line: a companion, claimed but not reported
    for svc in ("sudo", "su", "sshd", "login"):
        r = classify(svc, f"pam_unix({svc}:auth): authentication failure; logname= uid=1000 "
                          "euid=0 tty=/dev/pts/0 ruser=alice rhost=  user=alice")
        assert r is not None and r.kind == ""
    for companion in ("pam_unix(sudo:auth): conversation failed",
                      "pam_unix(sudo:auth): auth could not identify password for [nobody]",
                      "pam_unix(sshd:auth): check pass; user unknown",
                      "PAM 2 more authentication failures; logname= uid=0 euid=0 tty=ssh ruser= "
                      "rhost=203.0.113.7  user=root"):
        assert classify("sudo", companion).kind == ""  # type: ignore[union-attr]
    r = classify("chpasswd", "pam_unix(chpasswd:chauthtok): password changed for bob")
    assert r is not None and (r.kind, r.target) == ("password_change", "bob")
    r = classify("sshd", "pam_faillock(sshd:auth): Consecutive login failures for user root "
                         "account temporarily locked")
    assert r is not None and (r.kind, r.user) == ("account_locked", "root")
    assert classify("runuser", "pam_unix(runuser:session): session opened for user bob(uid=1001) "
                               "by (uid=0)") is None
    assert classify("sudo", "pam_limits(sudo:session): Could not set limit for 'core'") is None


def test_sshd_login_pkexec_polkit_lines() -> None:
    r = classify("sshd", "Failed password for invalid user admin from 203.0.113.7 port 50022 ssh2")
    assert r is not None and r.kind == "auth_failure" and r.user == "admin"
    assert r.remote_host == "203.0.113.7" and r.details == {
        "method": "password", "port": 50022, "invalid_user": True}
    r = classify("sshd-session", "Failed publickey for root from 2001:db8::1 port 22 ssh2: "
                                 "ED25519 SHA256:abc")
    assert r is not None and r.details["method"] == "publickey" and r.remote_host == "2001:db8::1"
    assert classify("sshd", "Accepted publickey for alice from 10.0.0.5 port 51234 ssh2") is None
    assert classify("sshd", "error: kex_exchange_identification: Connection closed") is None
    r = classify("login", "FAILED LOGIN (1) on '/dev/tty2' FOR 'bob', Authentication failure")
    assert r is not None and (r.kind, r.user, r.tty, r.attempts) == ("auth_failure", "bob",
                                                                     "tty2", 1)
    r = classify("login", "FAILED LOGIN 2 FROM tty3 FOR root, Authentication failure")
    assert r is not None and r.user == "root" and r.tty == "tty3"
    r = classify("pkexec", "alice: Executing command [USER=root] [TTY=/dev/pts/0] "
                           "[CWD=/home/alice] [COMMAND=/usr/bin/gparted]")
    assert r is not None and (r.kind, r.service, r.command) == ("sudo", "pkexec",
                                                                "/usr/bin/gparted")
    r = classify("pkexec", "bob: Error executing command as another user: Not authorized "
                           "[USER=root] [TTY=/dev/pts/1] [CWD=/tmp] [COMMAND=/usr/bin/bash]")
    assert r is not None and r.kind == "sudo_failure" and r.reason == "Not authorized"
    r = classify("polkitd", "Operator of unix-session:2 FAILED to authenticate to gain "
                            "authorization for action org.freedesktop.systemd1.manage-units for "
                            "system-bus-name::1.99 [systemctl restart x] (owned by unix-user:bob)")
    assert r is not None and r.kind == "auth_failure" and r.user == "bob"


def test_account_lines() -> None:
    r = classify("useradd", "new user: name=bob, UID=1001, GID=1001, home=/home/bob, "
                            "shell=/bin/bash, from=/dev/pts/0")
    assert r is not None and (r.kind, r.target, r.tty) == ("user_added", "bob", "pts/0")
    assert r.details == {"uid": 1001, "gid": 1001, "home": "/home/bob", "shell": "/bin/bash"}
    assert classify("useradd", "new group: name=bob, GID=1001").kind == ""  # type: ignore[union-attr]
    r = classify("groupadd", "new group: name=devs, GID=1002")
    assert r is not None and (r.kind, r.group, r.details["gid"]) == ("group_added", "devs", 1002)
    assert classify("groupadd", "group added to /etc/gshadow: name=devs").kind == ""  # type: ignore[union-attr]
    r = classify("usermod", "add 'bob' to group 'sudo'")
    assert r is not None and (r.kind, r.target, r.group) == ("group_membership", "bob", "sudo")
    assert classify("usermod", "add 'bob' to shadow group 'sudo'").kind == ""  # type: ignore[union-attr]
    r = classify("usermod", "delete 'bob' from group 'docker'")
    assert r is not None and r.details["action"] == "removed"
    assert classify("userdel", "delete 'bob' from group 'docker'").kind == ""  # type: ignore[union-attr]
    r = classify("gpasswd", "user bob added by root to group wheel")
    assert r is not None and (r.target, r.group, r.by) == ("bob", "wheel", "root")
    r = classify("userdel", "delete user 'bob'")
    assert r is not None and (r.kind, r.target) == ("user_removed", "bob")
    assert classify("userdel", "removed group 'bob' owned by 'bob'").kind == ""  # type: ignore[union-attr]
    r = classify("groupdel", "group 'devs' removed")
    assert r is not None and (r.kind, r.group) == ("group_removed", "devs")
    assert classify("groupdel", "group 'devs' removed from /etc/group").kind == ""  # type: ignore[union-attr]
    r = classify("usermod", "change user 'bob' shell from '/bin/sh' to '/bin/bash'")
    assert r is not None and r.kind == "user_modified"
    assert r.details["change"] == "change shell from '/bin/sh' to '/bin/bash'"
    r = classify("usermod", "change user name 'bob' to 'rob'")
    assert r is not None and r.details["change"] == "renamed to 'rob'"
    assert classify("usermod", "change user 'bob' password").kind == "password_change"  # type: ignore[union-attr]
    r = classify("passwd", "password for 'bob' changed by 'root'")
    assert r is not None and (r.kind, r.target, r.by) == ("password_change", "bob", "root")
    # only from the account tools: an application saying "new user:" is not an account change
    assert classify("myapp", "new user: name=bob, UID=1001") is None
    assert classify("cron", "(root) CMD (run-parts /etc/cron.hourly)") is None


# --- events -------------------------------------------------------------------------------

def test_sudo_events_name_the_user_target_command_and_tty() -> None:
    p = SecurityParser(ctx(), SecuritySettings())
    e = one(p, "Nov 29 06:32:27 box sudo:    alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; "
               "COMMAND=/usr/bin/apt install x")
    assert (e.category, e.subcategory, e.severity) == ("security", "sudo", Severity.INFO)
    assert e.summary == "alice ran a command as root with sudo on pts/0: /usr/bin/apt install x"
    m = meta(e)
    assert (m["user"], m["target_user"], m["command"], m["tty"], m["success"]) == (
        "alice", "root", "/usr/bin/apt install x", "pts/0", True)
    assert m["cwd"] == "/home/alice" and m["log_file"] == "/var/log/auth.log"
    assert e.actor == "alice" and e.source == "watcher.security" and e.metadata.service == "sudo"
    e = one(p, "Nov 29 06:32:27 box sudo: trprobeu : 3 incorrect password attempts ; TTY=pts/0 ; "
               "PWD=/tmp ; USER=root ; COMMAND=/usr/bin/true")
    assert (e.subcategory, e.severity) == ("sudo_failure", Severity.WARNING)
    assert e.summary == ("sudo failed for trprobeu: 3 incorrect password attempts (to run as root "
                         "on pts/0): /usr/bin/true")
    assert meta(e)["attempts"] == 3 and meta(e)["success"] is False
    e = one(p, "Nov 29 06:32:18 box sudo:   nobody : user NOT in sudoers ; PWD=/tmp ; USER=root ; "
               "COMMAND=/usr/bin/true")
    assert e.summary.startswith("sudo refused for nobody: user NOT in sudoers")


@pytest.mark.parametrize(("command", "secrets"), [
    ("/usr/bin/mysql -u root -pS3cretPw db", ["S3cretPw"]),
    ("/usr/bin/mysql -u root -p S3cretPw db", ["S3cretPw"]),
    ("/usr/local/bin/deploy --password=hunter2x --env prod", ["hunter2x"]),
    ("/usr/local/bin/deploy --db-password hunter2y", ["hunter2y"]),
    ("/usr/bin/curl -u admin:Tr0ub4dor https://example.com/x", ["Tr0ub4dor"]),
    ("/usr/bin/env TOKEN=abc123secret /usr/local/bin/sync", ["abc123secret"]),
    ("/usr/bin/env API_TOKEN=abc123secret DEPLOY_KEY=k3y /usr/local/bin/sync", ["abc123secret",
                                                                                "k3y"]),
    ("/bin/sh -c echo bob:Passw0rd! | chpasswd", ["Passw0rd"]),
    ("/bin/sh -c echo Passw0rd! | sudo -S true", ["Passw0rd"]),
    ("/usr/sbin/usermod -p $6$salt$abcdefghijk bob", ["abcdefghijk"]),
    ("/usr/bin/redis-cli -a redisPw ping", ["redisPw"]),
    ("/usr/bin/sshpass -p sshPw ssh host", ["sshPw"]),
    ("/usr/bin/nmcli dev wifi connect Home password wifiPw123", ["wifiPw123"]),
    ("/usr/bin/wpa_passphrase Home wifiPw456", ["wifiPw456"]),
    ("/usr/bin/smbclient //srv/x -U bob%smbPw", ["smbPw"]),
    ("/usr/bin/ldapsearch -x -D cn=admin -w ldapPw", ["ldapPw"]),
    ("/usr/bin/openssl enc -aes256 -k encPw -in f", ["encPw"]),
    ("/usr/bin/git clone https://bob:gitPw@example.com/r.git", ["gitPw"]),
    ("/usr/bin/docker login -u bob -p dockerPw registry", ["dockerPw"]),
    ("/usr/bin/psql postgresql://u:pgPw@db/app", ["pgPw"]),
])
def test_sudo_command_secrets_are_scrubbed(command: str, secrets: list[str]) -> None:
    p = SecurityParser(ctx(), SecuritySettings())
    e = one(p, f"Nov 29 06:32:27 box sudo:    alice : TTY=pts/0 ; PWD=/home/alice ; "
               f"ENV=DB_PASSWORD=envPw ; USER=root ; COMMAND={command}")
    published = e.model_dump_json()
    for secret in [*secrets, "envPw"]:
        assert secret not in published, (secret, e.summary)
    assert "[REDACTED]" in e.summary
    assert e.summary.startswith("alice ran a command as root with sudo on pts/0: /")


def test_scrub_command_text_and_new_shapes() -> None:
    assert scrub_command_text("/usr/bin/apt install -y nginx") == "/usr/bin/apt install -y nginx"
    assert scrub_command_text("/usr/bin/env -i FOO=1 mysql -p dbpw x") \
        == "/usr/bin/env -i FOO=1 mysql -p [REDACTED] x"
    assert scrub_command_text("/bin/sh -c redis-cli -a pw ping; ls -la") \
        == "/bin/sh -c redis-cli -a [REDACTED] ping; ls -la"
    assert scrub_command_text("") == ""
    assert len(scrub_command_text("x " * 600, max_chars=100)) == 100
    # the argv form keeps its quoting and its rules
    assert scrub_cmdline(["mysql", "-p", "a b", "it's"]) == "mysql -p [REDACTED] 'it'\\''s'"
    assert scrub_cmdline(["htpasswd", "-b", "f", "u", "pw"]) == "htpasswd -b f u [REDACTED]"
    assert scrub_cmdline(["ssh-keygen", "-N", "kpw", "-f", "k"]) == "ssh-keygen -N [REDACTED] -f k"
    # idempotent, and harmless words stay
    for text in ("echo hello | grep h", "zip -r a.zip dir", "gzip -P x", "nmcli con up Home"):
        assert scrub_extra(text) == text
    once = scrub_extra("echo 'pw x' | passwd --stdin bob")
    assert "pw x" not in once and scrub_extra(once) == once


def test_su_pam_and_sshd_events() -> None:
    p = SecurityParser(ctx(), SecuritySettings())
    assert parse_lines(p, "Nov 29 06:31:50 box su: pam_unix(su:auth): authentication failure; "
                          "logname= uid=65534 euid=0 tty=/dev/pts/0 ruser=nobody rhost=  user=root"
                       ) == []
    assert p.companions == 1
    e = one(p, "Nov 29 06:31:53 box su[25410]: FAILED SU (to root) nobody on pts/0")
    assert (e.subcategory, e.severity) == ("su_failure", Severity.WARNING)
    assert e.summary == "su failed: nobody could not switch to user root on pts/0 " \
                        "(authentication failure)"
    e = one(p, "Nov 29 06:31:53 box su[25411]: (to root) alice on pts/1")
    assert (e.subcategory, e.severity, e.summary) == (
        "su", Severity.INFO, "alice switched to user root with su on pts/1")
    e = one(p, "Nov 29 06:31:54 box sshd[900]: Failed password for invalid user admin from "
               "203.0.113.7 port 50022 ssh2")
    assert e.subcategory == "auth_failure"
    assert e.summary == "Failed SSH login for admin (no such user) from 203.0.113.7 (password)"
    assert meta(e)["remote_host"] == "203.0.113.7" and meta(e)["port"] == 50022
    assert e.metadata.host == "box"  # the machine; the attacker is remote_host
    e = one(p, "Nov 29 06:31:54 box gdm-password]: pam_unix(gdm-password:auth): authentication "
               "failure; logname= uid=0 euid=0 tty=/dev/tty1 ruser= rhost=  user=alice")
    assert e.summary == "Failed login (authentication failure) for alice via gdm-password on tty1"
    e = one(p, "Nov 29 06:31:54 box sshd[902]: pam_faillock(sshd:auth): Consecutive login "
               "failures for user root account temporarily locked")
    assert (e.subcategory, e.severity) == ("account_locked", Severity.ERROR)


def test_account_events_and_who_made_them() -> None:
    clock = FakeClock()
    p = SecurityParser(ctx(clock), SecuritySettings(attribution_window_s=120))
    events = parse_lines(
        p,
        "Nov 29 06:32:27 box sudo:    alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; "
        "COMMAND=/usr/sbin/useradd -m -G sudo bob",
        "Nov 29 06:32:27 box useradd[25586]: new group: name=bob, GID=1002",
        "Nov 29 06:32:27 box useradd[25586]: new user: name=bob, UID=1002, GID=1002, "
        "home=/home/bob, shell=/bin/bash, from=/dev/pts/0",
        "Nov 29 06:32:27 box useradd[25586]: add 'bob' to group 'sudo'",
        "Nov 29 06:32:27 box useradd[25586]: add 'bob' to shadow group 'sudo'")
    assert [e.subcategory for e in events] == ["sudo", "user_added", "group_membership"]
    added, member = events[1], events[2]
    assert added.summary == ("New user account bob added (UID 1002, GID 1002, home /home/bob, "
                             "shell /bin/bash) by alice (via sudo)")
    assert added.severity == Severity.WARNING and meta(added)["by_user"] == "alice"
    assert meta(added)["target_user"] == "bob" and meta(added)["uid"] == 1002
    assert member.summary == "User bob added to group sudo (an administrative group) by alice " \
                             "(via sudo)"
    assert meta(member)["privileged_group"] is True
    # another tool on another account, long after: not alice's
    clock.advance(200)
    e = one(p, "Nov 29 06:40:00 box groupadd[3000]: new group: name=devs, GID=1003")
    assert e.summary == "New group devs added (GID 1003)" and "by_user" not in meta(e)
    e = one(p, "Nov 29 06:40:00 box gpasswd[3001]: user carol removed by root from group devs")
    assert e.summary == "User carol removed from group devs by root"
    e = one(p, "Nov 29 06:40:01 box chpasswd[3002]: pam_unix(chpasswd:chauthtok): password "
               "changed for root")
    assert (e.subcategory, e.severity) == ("password_change", Severity.WARNING)
    e = one(p, "Nov 29 06:40:02 box userdel[3003]: delete user 'carol'")
    assert (e.subcategory, e.summary) == ("user_removed", "User account carol removed")


def test_journald_entries_login_uid_and_other_hosts() -> None:
    p = SecurityParser(ctx(), SecuritySettings(), user_name=uid_name)  # the users database
    entry = {"MESSAGE": "new group: name=ops, GID=1500", "SYSLOG_IDENTIFIER": "groupadd",
             "_PID": "4242", "PRIORITY": "6", "SYSLOG_FACILITY": "10", "_AUDIT_LOGINUID": "0"}
    (e,) = p.parse(json.dumps(entry))
    assert e.summary == "New group ops added (GID 1500) by root (via login uid)"
    assert meta(e)["pid"] == 4242 and meta(e)["attributed_via"] == "login uid"
    # the same line read twice (one process): one event; another process: another event
    assert p.parse(json.dumps(entry)) == []
    assert p.deduplicated == 1
    assert len(p.parse(json.dumps({**entry, "_PID": "4243"}))) == 1
    # a journal gathering another machine's entries: that host's event
    (e,) = p.parse(json.dumps({"MESSAGE": "(to root) bob on pts/3", "SYSLOG_IDENTIFIER": "su",
                               "_PID": "77", "_HOSTNAME": "web-1"}))
    assert e.metadata.host == "web-1"
    assert p.parse("not json") == [] and p.parse_errors == 1
    assert p.parse(json.dumps({"MESSAGE": "Started foo", "SYSLOG_IDENTIFIER": "systemd"})) == []


def test_failure_bursts_become_one_error_event_and_a_summary() -> None:
    clock = FakeClock()
    s = SecuritySettings(burst_window_s=60, burst_threshold=5, global_burst_threshold=20)
    p = SecurityParser(ctx(clock), s)
    events: list[MemoryEvent] = []
    for n in range(40):
        clock.advance(0.5)
        events += parse_lines(p, f"Nov 29 07:00:{n:02d} box sshd[{1000 + n}]: Failed password "
                                 f"for root from 198.51.100.9 port {40000 + n} ssh2")
    assert [e.severity for e in events] == [Severity.WARNING] * 4 + [Severity.ERROR]
    burst = events[4]
    assert burst.subcategory == "auth_failure" and meta(burst)["burst"] is True
    assert meta(burst)["count"] == 5 and meta(burst)["remote_host"] == "198.51.100.9"
    assert burst.summary.startswith("Burst of failed logins: 5 authentication failures from "
                                    "198.51.100.9 within 60 s (users: root (5); sshd)")
    assert p.burst_suppressed == 35
    clock.advance(61)
    (tail,) = p.flush()
    assert tail.severity == Severity.ERROR and meta(tail)["count"] == 35
    assert tail.summary.startswith("Failed logins from 198.51.100.9 went on: 35 more "
                                   "authentication failures in the 60 s window")
    assert p.flush() == []
    # a new window: one by one again
    assert [e.severity for e in parse_lines(p, "Nov 29 07:02:00 box sshd[2000]: Failed password "
                                               "for root from 198.51.100.9 port 1 ssh2")] \
        == [Severity.WARNING]


def test_a_distributed_attack_is_one_burst_too() -> None:
    clock = FakeClock()
    p = SecurityParser(ctx(clock), SecuritySettings(global_burst_threshold=20))
    events: list[MemoryEvent] = []
    for n in range(60):
        clock.advance(0.2)
        events += parse_lines(p, f"Nov 29 07:00:00 box sshd[{n + 1}]: Failed password for "
                                 f"user{n % 7} from 203.0.113.{n} port 22 ssh2")
    assert len(events) == 20 and events[-1].severity == Severity.ERROR
    assert events[-1].summary.startswith("Burst of failed logins or sudo/su attempts: 20 "
                                         "authentication failures from all sources")
    clock.advance(60)
    (tail,) = p.flush()
    assert meta(tail)["count"] == 40 and len(meta(tail)["remote_hosts"]) == 20


def test_repeated_sudo_failures_of_one_user_burst_without_a_pid() -> None:
    clock = FakeClock()
    p = SecurityParser(ctx(clock), SecuritySettings(burst_threshold=3))
    line = ("Nov 29 06:32:20 box sudo: mallory : 1 incorrect password attempt ; PWD=/tmp ; "
            "USER=root ; COMMAND=/usr/bin/id")
    events = []
    for _ in range(5):
        clock.advance(1)
        events += parse_lines(p, line)
    assert [e.subcategory for e in events] == ["sudo_failure"] * 3
    assert events[-1].severity == Severity.ERROR and meta(events[-1])["user"] == "mallory"
    assert events[-1].summary.startswith("Burst of sudo failures: 3 authentication failures "
                                         "for mallory")


def test_claims_and_the_journal_parser_leaving_them() -> None:
    assert claims("sudo", "alice : 3 incorrect password attempts ; TTY=pts/0 ; PWD=/ ; "
                          "USER=root ; COMMAND=/bin/true")
    assert claims("sudo", "pam_unix(sudo:auth): conversation failed")
    assert not claims("sshd", "error: kex_exchange_identification: Connection closed")
    assert not claims("app", "authentication failure in module x")
    jp = JournalParser(ctx(), claim=lambda ident, message, _log: claims(ident, message))
    assert jp.parse(json.dumps({"MESSAGE": "alice : user NOT in sudoers ; PWD=/ ; USER=root ; "
                                           "COMMAND=/bin/true", "PRIORITY": "1",
                                "SYSLOG_IDENTIFIER": "sudo"})) is None
    assert jp.claimed == 1
    e = jp.parse(json.dumps({"MESSAGE": "disk on fire", "PRIORITY": "3",
                             "SYSLOG_IDENTIFIER": "smartd"}))
    assert e is not None and e.category == "error"


def test_watcher_unavailable_without_a_source(tmp_path: Path) -> None:
    s = SecuritySettings(journald=False, log_files=[str(tmp_path / "auth.log")])
    w = SecurityWatcher(ctx(), s)
    reason = w.check_available()
    assert reason is not None and "journald disabled" in reason and "auth.log" in reason
    assert not w.claims("su", "(to root) a on pts/1")  # not running: the journal keeps them


async def collect(w: SecurityWatcher, until: int, timeout: float = 10) -> list[MemoryEvent]:
    got: list[MemoryEvent] = []

    async def emit(e: MemoryEvent) -> bool:
        got.append(e)
        return True

    stop = asyncio.Event()
    task = asyncio.create_task(w.run(emit, stop))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while len(got) < until:
            assert loop.time() < deadline, [e.summary for e in got]
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    return got


async def test_watcher_tails_an_auth_log(tmp_path: Path) -> None:
    log = tmp_path / "auth.log"
    log.write_text("Nov 29 06:00:00 box su[1]: (to root) old on pts/9\n")  # history: not read
    w = SecurityWatcher(ctx(), SecuritySettings(journald=False, log_files=[str(log)],
                                                log_poll_s=0.05))
    assert w.check_available() is None and w.streaming
    assert w.note is not None and str(log) in w.note and "no journald" in w.note
    # Claimed from its own auth log, not from a log it does not read, nor from a journal.
    assert w.claims("su", "(to root) a on pts/1", str(log))
    assert not w.claims("su", "(to root) a on pts/1", str(tmp_path / "app.log"))
    assert not w.claims("su", "(to root) a on pts/1")
    with log.open("a") as f:
        f.write("Nov 29 06:31:53 box su[25410]: FAILED SU (to root) nobody on pts/0\n"
                "Nov 29 06:31:54 box CRON[5]: pam_unix(cron:session): session opened for user "
                "root(uid=0) by (uid=0)\n"
                "Nov 29 06:31:55 box useradd[7]: new user: name=eve, UID=1005, GID=1005, "
                "home=/home/eve, shell=/bin/sh, from=none\n")
    got = await collect(w, 2)
    assert [e.subcategory for e in got] == ["su_failure", "user_added"]
    assert meta(got[0])["log_file"] == str(log)
    w.close()


async def test_watcher_follows_journald(tmp_path: Path) -> None:
    entries = [{"MESSAGE": "    alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; "
                           "COMMAND=/usr/bin/systemctl restart nginx",
                "SYSLOG_IDENTIFIER": "sudo", "_PID": "10", "PRIORITY": "5"},
               {"MESSAGE": "Started something", "SYSLOG_IDENTIFIER": "systemd"},
               {"MESSAGE": "Failed password for root from 192.0.2.1 port 2 ssh2",
                "SYSLOG_IDENTIFIER": "sshd", "_PID": "11", "PRIORITY": "6"}]
    script = tmp_path / "fake_journalctl.py"
    script.write_text("import sys, time\n" + "".join(
        f"print({json.dumps(e)!r}, flush=True)\n" for e in entries) + "time.sleep(60)\n")
    s = SecuritySettings(command=[sys.executable, str(script)], skip_availability_check=True)
    w = SecurityWatcher(ctx(), s)
    assert w.check_available() is None and w.journald and w.tails == []
    got = await collect(w, 2)
    assert [e.subcategory for e in got] == ["sudo", "auth_failure"]
    assert got[0].summary == ("alice ran a command as root with sudo on pts/0: "
                              "/usr/bin/systemctl restart nginx")


# --- listening ports ----------------------------------------------------------------------

class FakePorts:
    def __init__(self) -> None:
        self.now: list[Listener] = []
        self.procs = {4242: Proc("python3", ["python3", "-m", "http.server", "--token", "tkn1"]),
                      77: Proc("sshd", ["/usr/sbin/sshd", "-D"])}

    def listeners(self, udp: bool) -> list[Listener]:
        return [x for x in self.now if udp or x.proto == "tcp"]

    def process(self, pid: int) -> Proc | None:
        return self.procs.get(pid)


def test_ports_listen_and_unlisten() -> None:
    src = FakePorts()
    src.now = [Listener("tcp", 22, "0.0.0.0", 77), Listener("tcp", 22, "::", 77)]
    w = PortsWatcher(ctx(), PortsSettings(ignore_ports=[9999]), source=src)
    assert w.check_available() is None
    assert w.poll() == []  # the baseline
    src.now += [Listener("tcp", 8000, "127.0.0.1", 4242), Listener("tcp", 9999, "0.0.0.0", 1),
                Listener("udp", 5353, "0.0.0.0", 77)]
    (e,) = w.poll()
    assert (e.category, e.subcategory, e.severity) == ("system.network", "listen", Severity.INFO)
    assert e.summary == ("Port 8000/tcp now listening on 127.0.0.1 (loopback only) — python3 "
                         "(PID 4242): python3 -m http.server --token [REDACTED]")
    m = meta(e)
    assert (m["port"], m["protocol"], m["process"], m["pid"], m["exposed"]) == (
        8000, "tcp", "python3", 4242, False)
    assert "tkn1" not in e.model_dump_json()
    assert w.poll() == []  # nothing changed
    # now on every address too: exposed, a warning
    src.now.append(Listener("tcp", 8000, "0.0.0.0", 4242))
    (e,) = w.poll()
    assert e.subcategory == "listen" and e.severity == Severity.WARNING
    assert e.summary.startswith("Port 8000/tcp now listens on 0.0.0.0 as well (0.0.0.0, "
                                "127.0.0.1: exposed beyond this machine)")
    src.now = [x for x in src.now if x.port != 8000]
    src.now.append(Listener("tcp", 6000, "::", None))  # another user's process
    events = w.poll()
    assert [(e.subcategory, meta(e)["port"]) for e in events] == [("listen", 6000),
                                                                   ("unlisten", 8000)]
    assert "an unknown process (not permitted to see it)" in events[0].summary
    assert events[1].summary == ("Port 8000/tcp no longer listening (was python3 (PID 4242), on "
                                 "0.0.0.0, 127.0.0.1)")
    assert events[1].severity == Severity.INFO
    assert w.stats()["unknown_owner"] == 1


def test_ports_udp_when_asked_and_unavailable_source() -> None:
    src = FakePorts()
    w = PortsWatcher(ctx(), PortsSettings(udp=True), source=src)
    w.poll()
    src.now = [Listener("udp", 5353, "0.0.0.0", 77)]
    (e,) = w.poll()
    assert e.summary.startswith("Port 5353/udp now listening on 0.0.0.0 (exposed beyond this "
                                "machine) — sshd (PID 77)")

    class Denied:
        def listeners(self, udp: bool) -> list[Listener]:
            raise PermissionError("psutil.AccessDenied")

        def process(self, pid: int) -> Proc | None:
            return None

    reason = PortsWatcher(ctx(), PortsSettings(), source=Denied()).check_available()
    assert reason is not None and "cannot list the listening sockets" in reason


# --- firewall -----------------------------------------------------------------------------

NFT_BEFORE = """table inet filter {
\tchain input {
\t\ttype filter hook input priority filter; policy accept;
\t\tct state established,related accept
\t\ttcp dport 22 counter packets 12 bytes 3400 accept
\t}
\tset blocked {
\t\ttype ipv4_addr
\t\tflags timeout
\t\telements = { 192.0.2.1 expires 3m12s }
\t}
}
"""
NFT_AFTER = NFT_BEFORE.replace("counter packets 12 bytes 3400", "counter packets 99 bytes 9") \
    .replace("expires 3m12s", "expires 2m1s") \
    .replace("\t\ttcp dport 22", "\t\ttcp dport 8080 accept\n\t\ttcp dport 22")

IPT = """# Generated by iptables-save v1.8.9 (nf_tables) on Sun Nov 29 06:19:51 2026
*filter
:INPUT ACCEPT [10:200]
:FORWARD DROP [0:0]
-A INPUT -i lo -j ACCEPT
COMMIT
# Completed on Sun Nov 29 06:19:51 2026
"""


def test_nft_and_iptables_normalised() -> None:
    lines = nft_lines(NFT_BEFORE)
    assert "table inet filter / chain input: tcp dport 22 accept" in lines
    assert "table inet filter / set blocked: elements = { 192.0.2.1 }" in lines
    assert nft_lines(NFT_BEFORE) == nft_lines(NFT_BEFORE.replace("12 bytes 3400", "1 bytes 1"))
    assert iptables_lines(IPT) == ["filter: :INPUT ACCEPT", "filter: :FORWARD DROP",
                                   "filter: -A INPUT -i lo -j ACCEPT"]
    assert iptables_lines(IPT.replace("[10:200]", "[11:999]").replace("06:19:51", "07:00:00"),
                          "ip6 ")[0] == "ip6 filter: :INPUT ACCEPT"


class FakeRun:
    def __init__(self, outputs: dict[str, tuple[int, str, str]]) -> None:
        self.outputs = outputs

    def __call__(self, argv: list[str], timeout: float) -> tuple[int, str, str]:
        return self.outputs[argv[0]]


def test_firewall_change_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/sbin/{name}")
    run = FakeRun({"nft": (0, NFT_BEFORE, "")})
    w = FirewallWatcher(ctx(), FirewallSettings(), run=run)
    assert w.check_available() is None and w.tool == "nft"
    assert w.poll() == []
    run.outputs["nft"] = (0, NFT_BEFORE.replace("packets 12", "packets 13"), "")
    assert w.poll() == []  # counters only
    run.outputs["nft"] = (0, NFT_AFTER, "")
    (e,) = w.poll()
    assert (e.category, e.subcategory, e.severity) == ("security", "firewall", Severity.WARNING)
    assert e.summary == ("Firewall rules changed (nft): 1 added, 0 removed — + table inet filter / "
                         "chain input: tcp dport 8080 accept")
    m = meta(e)
    assert (m["tool"], m["added"], m["removed"]) == ("nft", 1, 0)
    assert m["added_rules"] == ["table inet filter / chain input: tcp dport 8080 accept"]
    run.outputs["nft"] = (0, "", "")
    (e,) = w.poll()
    assert m["rules"] > 0 and meta(e)["removed"] == len(nft_lines(NFT_AFTER))
    assert "and" in e.summary and "more" in e.summary
    run.outputs["nft"] = (1, "", "netlink: Error: cache initialization failed")
    with pytest.raises(RuntimeError, match="cache initialization failed"):
        w.poll()


def test_firewall_falls_back_to_iptables_and_says_why_it_cannot(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/sbin/{name}")
    run = FakeRun({"nft": (1, "", "Operation not permitted (you must be root)"),
                   "iptables-save": (0, IPT, ""), "ip6tables-save": (0, IPT, "")})
    w = FirewallWatcher(ctx(), FirewallSettings(), run=run)
    assert w.check_available() is None and w.tool == "iptables"
    assert len(w.read()) == 6 and w.read()[3].startswith("ip6 filter:")
    run.outputs = {"nft": (1, "", "Operation not permitted"),
                   "iptables-save": (4, "", "iptables-save v1.8.9 (nf_tables): Could not fetch "
                                            "rule set generation id: Permission denied"),
                   "ip6tables-save": (4, "", "Permission denied")}
    reason = FirewallWatcher(ctx(), FirewallSettings(), run=run).check_available()
    assert reason is not None and reason.startswith("cannot read the firewall ruleset: ")
    assert "nft --stateless list ruleset: Operation not permitted" in reason
    assert "needs root or CAP_NET_ADMIN" in reason
    monkeypatch.setattr("shutil.which", lambda name: None)
    reason = FirewallWatcher(ctx(), FirewallSettings(), run=run).check_available()
    assert reason == ("cannot read the firewall ruleset: nft not found on PATH; iptables-save not "
                      "found on PATH; ip6tables-save not found on PATH")
