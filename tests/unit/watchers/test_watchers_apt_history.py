"""apt's history log (its real format) read into runs, and a dpkg change matched to the run
that made it: by time and by package."""

from __future__ import annotations

from datetime import UTC, datetime

from totalrecall_watchers.core.packages_changes import PackageChange, apt_runs

HISTORY = """
Start-Date: 2026-11-29  04:45:21
Commandline: apt-get install -y -qq --no-install-recommends podman runc iptables
Requested-By: alice (1000)
Install: libnfnetlink0:amd64 (1.0.2-2, automatic), podman:amd64 (4.3.1+ds1-8+deb12u1+b3), runc:amd64 (1.1.5+ds1-1+deb12u1)
Upgrade: login:amd64 (1:4.13+dfsg1-1+deb12u1, 1:4.13+dfsg1-1+deb12u2)
End-Date: 2026-11-29  04:45:32

Start-Date: 2026-11-29  05:00:01
Commandline: apt-get remove -y runc
Remove: runc:amd64 (1.1.5+ds1-1+deb12u1)
End-Date: 2026-11-29  05:00:02

Start-Date: 2026-11-29  05:10:00
Commandline: mysql-setup --password=hunter2secret
Install: mariadb-server:amd64 (1:10.11.6-0+deb12u1)
End-Date: 2026-11-29  05:10:09
"""


def _local(s: str) -> datetime:
    return datetime.fromisoformat(s).astimezone(UTC)


def _change(pkg: str, when: str, action: str = "install") -> PackageChange:
    return PackageChange("dpkg", action, pkg, "1", None, at=_local(when), origin=pkg + when)


def test_runs_are_read_with_their_command_user_and_packages() -> None:
    first, second, third = apt_runs(HISTORY)
    assert first.command == "apt-get install -y -qq --no-install-recommends podman runc iptables"
    assert first.requested_by == "alice (1000)"
    assert first.packages == {"libnfnetlink0", "podman", "runc", "login"}
    assert first.start == _local("2026-11-29T04:45:21") and first.end == _local("2026-11-29T04:45:32")
    assert second.packages == {"runc"} and second.requested_by is None
    assert "hunter2secret" not in third.command  # a command line is scrubbed like any text


def test_a_change_is_matched_by_time_and_package() -> None:
    runs = apt_runs(HISTORY)
    assert [r for r in runs if r.covers(_change("podman", "2026-11-29T04:45:30"))] == [runs[0]]
    assert [r for r in runs if r.covers(_change("runc", "2026-11-29T05:00:02", "remove"))] \
        == [runs[1]]
    assert not any(r.covers(_change("podman", "2026-11-29T06:00:00")) for r in runs)
    assert not any(r.covers(_change("nginx", "2026-11-29T04:45:25")) for r in runs)


def test_a_torn_or_empty_log_gives_no_runs() -> None:
    assert apt_runs("") == []
    assert apt_runs("Start-Date: not a date\nCommandline: x\n") == []
