"""The package watcher's pure parts: the dpkg log state machine (on lines of this machine's real
/var/log/dpkg.log, plus remove/purge/failed operations in dpkg's format), snapshot diffs,
grouping, the persisted state and stable ids."""

from __future__ import annotations

from pathlib import Path

import pytest
from totalrecall_watchers.adapters import packages
from totalrecall_watchers.adapters.packages import PackagesWatcher, TailState, read_new_lines
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.packages_changes import DpkgLog, diff_snapshots
from totalrecall_watchers.settings import PackagesSettings

# Copied from this machine's /var/log/dpkg.log (Debian 12): an upgrade, then an install with
# its trigger processing (trigproc/status installed without an action: not a change).
REAL_UPGRADE = """\
2025-06-24 14:36:25 startup archives unpack
2025-06-24 14:36:25 upgrade libsystemd0:amd64 252.36-1~deb12u1 252.38-1~deb12u1
2025-06-24 14:36:25 status triggers-pending libc-bin:amd64 2.36-9+deb12u10
2025-06-24 14:36:25 status half-configured libsystemd0:amd64 252.36-1~deb12u1
2025-06-24 14:36:25 status unpacked libsystemd0:amd64 252.36-1~deb12u1
2025-06-24 14:36:25 status half-installed libsystemd0:amd64 252.36-1~deb12u1
2025-06-24 14:36:25 status unpacked libsystemd0:amd64 252.38-1~deb12u1
2025-06-24 14:36:25 startup packages configure
2025-06-24 14:36:25 configure libsystemd0:amd64 252.38-1~deb12u1 <none>
2025-06-24 14:36:25 status unpacked libsystemd0:amd64 252.38-1~deb12u1
2025-06-24 14:36:25 status half-configured libsystemd0:amd64 252.38-1~deb12u1
2025-06-24 14:36:25 status installed libsystemd0:amd64 252.38-1~deb12u1
"""
REAL_INSTALL = """\
2026-11-25 10:09:48 install iptables:amd64 <none> 1.8.9-2
2026-11-25 10:09:48 status half-installed iptables:amd64 1.8.9-2
2026-11-25 10:09:48 status unpacked iptables:amd64 1.8.9-2
2026-11-25 10:09:48 configure iptables:amd64 1.8.9-2 <none>
2026-11-25 10:09:48 status half-configured iptables:amd64 1.8.9-2
2026-11-25 10:09:48 status installed iptables:amd64 1.8.9-2
2026-11-25 10:09:50 trigproc libc-bin:amd64 2.36-9+deb12u14 <none>
2026-11-25 10:09:50 status half-configured libc-bin:amd64 2.36-9+deb12u14
2026-11-25 10:09:50 status installed libc-bin:amd64 2.36-9+deb12u14
"""
REMOVE_PURGE_FAILED = """\
2026-11-25 11:00:01 remove iptables:amd64 1.8.9-2 <none>
2026-11-25 11:00:01 status half-configured iptables:amd64 1.8.9-2
2026-11-25 11:00:01 status half-installed iptables:amd64 1.8.9-2
2026-11-25 11:00:02 status config-files iptables:amd64 1.8.9-2
2026-11-25 11:00:03 purge nano:amd64 7.2-1 <none>
2026-11-25 11:00:03 status config-files nano:amd64 7.2-1
2026-11-25 11:00:03 status not-installed nano:amd64 <none>
2026-11-25 11:00:04 install broken-pkg:amd64 <none> 0.1
2026-11-25 11:00:04 status half-installed broken-pkg:amd64 0.1
"""


def feed(text: str, log: DpkgLog | None = None) -> list[tuple[str, str, str | None, str | None]]:
    log = log or DpkgLog()
    return [(c.action, c.package, c.version, c.old_version)
            for c in map(log.feed, text.splitlines()) if c is not None]


def test_dpkg_upgrade_and_install_from_the_real_log() -> None:
    assert feed(REAL_UPGRADE) == [("upgrade", "libsystemd0", "252.38-1~deb12u1",
                                   "252.36-1~deb12u1")]
    assert feed(REAL_INSTALL) == [("install", "iptables", "1.8.9-2", None)]


def test_dpkg_remove_purge_and_an_unfinished_install() -> None:
    log = DpkgLog()
    assert feed(REMOVE_PURGE_FAILED, log) == [("remove", "iptables", None, "1.8.9-2"),
                                              ("remove", "nano", None, "7.2-1")]
    assert list(log.pending) == ["broken-pkg:amd64"]  # never reached "installed"
    # ...and is reported when it does, even in a later poll (pending state carried over)
    later = DpkgLog(log.pending)
    assert feed("2026-11-25 11:05:00 status installed broken-pkg:amd64 0.1\n", later) == [
        ("install", "broken-pkg", "0.1", None)]


def test_tail_starts_at_the_end_and_follows_rotation(tmp_path: Path) -> None:
    log = tmp_path / "dpkg.log"
    log.write_text(REAL_UPGRADE)
    lines, st = read_new_lines(log, TailState())
    assert lines == [] and st.offset == len(REAL_UPGRADE)
    with log.open("a") as f:
        f.write(REAL_INSTALL[:30])  # half a line: waits for its newline
    lines, st = read_new_lines(log, st)
    assert lines == []
    with log.open("a") as f:
        f.write(REAL_INSTALL[30:])
    lines, st = read_new_lines(log, st)
    assert lines == REAL_INSTALL.splitlines()
    with log.open("a") as f:
        f.write(REMOVE_PURGE_FAILED.splitlines(keepends=True)[0])
    log.rename(tmp_path / "dpkg.log.1")  # logrotate
    log.write_text("".join(REMOVE_PURGE_FAILED.splitlines(keepends=True)[1:4]))
    lines, st = read_new_lines(log, st)
    assert lines == REMOVE_PURGE_FAILED.splitlines()[:4]


def test_snapshot_diff() -> None:
    changes = diff_snapshots("pip", "/venv", {"a": "1.0", "b": "2.0", "c": "1.0"},
                             {"a": "1.1", "c": "1.0", "d": "0.1"}, 3)
    assert [(c.action, c.package, c.version, c.old_version) for c in changes] == [
        ("upgrade", "a", "1.1", "1.0"), ("remove", "b", None, "2.0"),
        ("install", "d", "0.1", None)]


def watcher(tmp_path: Path, **kw: object) -> PackagesWatcher:
    settings = PackagesSettings(**{"dpkg_log": str(tmp_path / "dpkg.log"), "pip": False,
                                   "npm": False,
                                   "apt_history": str(tmp_path / "apt-history.log"), **kw})
    return PackagesWatcher(EventContext(hostname="box", clock=FakeClock()), settings,
                           tmp_path / "state" / "packages.json")


def test_watcher_events_state_and_restart(tmp_path: Path) -> None:
    log = tmp_path / "dpkg.log"
    log.write_text(REAL_UPGRADE)
    w = watcher(tmp_path)
    assert w.check_available() is None and w.poll() == []  # history is not replayed
    with log.open("a") as f:
        f.write(REAL_INSTALL + REMOVE_PURGE_FAILED)
    events = w.poll()
    assert [(e.category, e.subcategory, e.metadata.package) for e in events] == [
        ("system.package", "install", "iptables"), ("system.package", "remove", "iptables"),
        ("system.package", "remove", "nano")]
    first = events[0]
    assert first.summary == "apt/dpkg: installed iptables 1.8.9-2"
    meta = first.metadata.model_dump()
    assert meta["manager"] == "dpkg" and meta["version"] == "1.8.9-2" and "old_version" not in meta
    assert first.timestamp.isoformat().startswith("2026-11-25")
    # A crash before the next poll committed the state: the same lines again, the same ids.
    again = watcher(tmp_path)
    again._state = {"dpkg": {"inode": log.stat().st_ino, "offset": len(REAL_UPGRADE)}}
    assert [e.id for e in again.poll()] == [e.id for e in events]
    # The next poll commits; a restarted watcher continues after it (and keeps the pending op).
    assert w.poll() == []
    restarted = watcher(tmp_path)
    with log.open("a") as f:
        f.write("2026-11-25 11:05:00 status installed broken-pkg:amd64 0.1\n")
    assert [e.summary for e in restarted.poll()] == ["apt/dpkg: installed broken-pkg 0.1"]


def test_many_changes_in_one_poll_become_one_event(tmp_path: Path) -> None:
    log = tmp_path / "dpkg.log"
    log.write_text("")
    w = watcher(tmp_path, max_individual=2)
    w.poll()
    with log.open("a") as f:
        f.write(REAL_UPGRADE + REAL_INSTALL + REMOVE_PURGE_FAILED)
    (e,) = w.poll()
    assert e.summary.startswith("apt/dpkg: 2 packages removed, 1 packages upgraded, "
                                "1 packages installed: libsystemd0, iptables")
    assert e.subcategory == "remove" and e.metadata.model_dump()["count"] == 4
    assert "upgraded libsystemd0 252.36-1~deb12u1 → 252.38-1~deb12u1" in e.detail


def test_no_source_is_unavailable(tmp_path: Path) -> None:
    assert "no package source" in (watcher(tmp_path).check_available() or "")


def test_pip_is_read_only_when_its_directory_changed(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    reads: list[str] = []
    real = packages.pip_snapshot
    monkeypatch.setattr(packages, "pip_snapshot", lambda env: reads.append(env) or real(env))

    def dist(name: str, version: str) -> None:
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")

    w = watcher(tmp_path, pip=True, pip_environments=[str(site)], dpkg=False)
    assert [w.poll(), w.poll(), w.poll(), w.poll()] == [[], [], [], []]
    assert len(reads) == 2  # the baseline, once more to let it settle, then only a stat
    dist("tr-demo", "1.0")
    (e,) = w.poll()
    assert e.summary == f"pip in {site}: installed tr-demo 1.0"
    assert w.poll() == [] and w.poll() == [] and len(reads) == 4


def test_a_dpkg_change_names_the_apt_command_that_asked(tmp_path: Path) -> None:
    (tmp_path / "apt-history.log").write_text(
        "\nStart-Date: 2026-11-25  11:00:00\nCommandline: apt-get install nginx\n"
        "Requested-By: alice (1000)\nInstall: nginx:amd64 (1.22.1-9)\n"
        "End-Date: 2026-11-25  11:00:09\n")
    w = watcher(tmp_path)
    (tmp_path / "dpkg.log").write_text("")
    assert w.poll() == []
    with open(tmp_path / "dpkg.log", "a") as f:
        f.write("2026-11-25 11:00:05 install nginx:amd64 <none> 1.22.1-9\n"
                "2026-11-25 11:00:06 status installed nginx:amd64 1.22.1-9\n")
    [ev] = w.poll()
    assert ev.summary == ("apt/dpkg: installed nginx 1.22.1-9 (by `apt-get install nginx`, "
                          "requested by alice)")
    md = ev.metadata.model_dump()
    assert md["command"] == "apt-get install nginx" and md["requested_by"] == "alice (1000)"
