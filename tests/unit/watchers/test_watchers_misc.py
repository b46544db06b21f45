"""Storage, network, NixOS generations, user sessions, filesystem change tracking."""

from __future__ import annotations

import os
from pathlib import Path

from totalrecall_schema import Severity
from totalrecall_watchers.adapters.filesystem import FileChangeTracker, FilesystemWatcher
from totalrecall_watchers.adapters.nixos import NixosWatcher
from totalrecall_watchers.adapters.storage import PsutilStorage
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.filesystem import PathFilter
from totalrecall_watchers.core.network import Iface, NetworkWatcher
from totalrecall_watchers.core.sessions import SessionsWatcher
from totalrecall_watchers.core.storage import StorageWatcher, Usage
from totalrecall_watchers.settings import (
    FilesystemSettings,
    NetworkSettings,
    NixosSettings,
    StorageSettings,
)

GiB = 1024**3


def ctx() -> EventContext:
    return EventContext(hostname="box", clock=FakeClock())


# --- storage ------------------------------------------------------------------------------------
class Disks:
    def __init__(self) -> None:
        self.pct: dict[str, float] = {"/": 50.0, "/home": 50.0}
        self.inode_pct: dict[str, float] = {"/": 10.0, "/home": 10.0}

    def usage(self) -> list[Usage]:
        out = []
        for m, p in self.pct.items():
            total = 100 * GiB
            files = 1000
            out.append(Usage(m, f"/dev/{m.strip('/') or 'root'}", "ext4", total,
                             int(total * p / 100), int(total * (100 - p) / 100), p, files,
                             int(files * (100 - self.inode_pct.get(m, 0)) / 100)))
        return out


def test_storage_crossings_only() -> None:
    d = Disks()
    w = StorageWatcher(ctx(), StorageSettings(), source=d)
    assert w.poll() == []
    d.pct["/home"] = 92
    (e,) = w.poll()
    assert (e.category, e.subcategory, e.severity) == ("system.storage", "space_warning",
                                                       Severity.WARNING)
    assert e.summary == "/home at 92% capacity, 8.0 GiB remaining"
    assert e.metadata.path == "/home"
    d.pct["/home"] = 93
    assert w.poll() == []
    d.pct["/home"] = 96
    (e,) = w.poll()
    assert e.severity == Severity.CRITICAL
    d.pct["/home"] = 94.5  # within hysteresis of critical
    assert w.poll() == []
    d.pct["/home"] = 91  # critical → warning is not news
    assert w.poll() == []
    d.pct["/home"] = 80
    (e,) = w.poll()
    assert "back to 80%" in e.summary and e.severity == Severity.INFO
    d.inode_pct["/"] = 97
    (e,) = w.poll()
    assert e.subcategory == "inode_warning" and "inodes at 97%" in e.summary


def test_storage_reports_existing_problem_at_start_and_mounts() -> None:
    d = Disks()
    d.pct["/"] = 91
    w = StorageWatcher(ctx(), StorageSettings(), source=d)
    assert [e.subcategory for e in w.poll()] == ["space_warning"]
    d.pct["/mnt/usb"] = 10
    assert [e.subcategory for e in w.poll()] == ["mount"]
    del d.pct["/mnt/usb"]
    assert [e.subcategory for e in w.poll()] == ["unmount"]


def test_real_storage_source_runs() -> None:
    s = StorageSettings(paths=["/"])
    w = StorageWatcher(ctx(), s, source=PsutilStorage(s.paths, s.include_partitions))
    assert isinstance(w.poll(), list)


# --- network ------------------------------------------------------------------------------------
class Net:
    def __init__(self) -> None:
        self.ifaces = {"lo": Iface(True, frozenset({"127.0.0.1"})),
                       "eth0": Iface(True, frozenset({"10.0.0.2"}))}
        self.dns_error: str | None = None

    def interfaces(self) -> dict[str, Iface]:
        return dict(self.ifaces)

    def resolve(self, host: str, timeout: float) -> str | None:
        return self.dns_error


def test_network_changes() -> None:
    n = Net()
    w = NetworkWatcher(ctx(), NetworkSettings(), source=n)
    assert w.poll() == [] and w.poll() == []
    n.ifaces["eth0"] = Iface(True, frozenset({"10.0.0.3"}))
    (e,) = w.poll()
    assert e.subcategory == "address_change" and "added 10.0.0.3" in e.summary
    n.ifaces["eth0"] = Iface(False, frozenset({"10.0.0.3"}))
    (e,) = w.poll()
    assert e.subcategory == "disconnect" and e.summary == "interface eth0 is down"
    n.ifaces["wlan0"] = Iface(True, frozenset({"192.168.1.5"}))
    (e,) = w.poll()
    assert e.subcategory == "connect" and "wlan0 appeared" in e.summary
    del n.ifaces["wlan0"]
    assert [x.subcategory for x in w.poll()] == ["disconnect"]


def test_dns_check_off_by_default_and_transitions() -> None:
    n = Net()
    n.dns_error = "boom"
    assert NetworkWatcher(ctx(), NetworkSettings(), source=n).poll() == []
    w = NetworkWatcher(ctx(), NetworkSettings(dns_check=True, dns_host="nixos.org"), source=n)
    (e,) = w.poll()
    assert e.subcategory == "dns_fail" and "nixos.org" in e.summary
    assert w.poll() == []
    n.dns_error = None
    (e,) = w.poll()
    assert e.subcategory == "connect"


# --- NixOS --------------------------------------------------------------------------------------
def test_nixos_generations(tmp_path: Path) -> None:
    prof = tmp_path / "profiles"
    prof.mkdir()
    w = NixosWatcher(ctx(), NixosSettings(profiles_dir=str(prof), diff_closures=False))
    assert "not NixOS" in (w.check_available() or "")

    def gen(n: int) -> None:
        os.symlink(f"/nix/store/{n:032d}-nixos-system-box", prof / f"system-{n}-link")

    def switch(n: int) -> None:
        tmp = prof / "system.tmp"
        os.symlink(f"system-{n}-link", tmp)
        os.replace(tmp, prof / "system")

    gen(41)
    gen(42)
    switch(42)
    assert w.check_available() is None
    assert w.poll() == []
    gen(43)
    switch(43)
    events = w.poll()
    assert [(e.category, e.subcategory, e.metadata.generation) for e in events] == [
        ("system.config", "generation", 43), ("system.config", "generation", 43)]
    assert events[0].summary == "NixOS generation 43 created"
    switch(41)
    (e,) = w.poll()
    assert (e.category, e.subcategory) == ("system.package", "rollback")
    assert "rollback" in e.summary


# --- sessions -----------------------------------------------------------------------------------
def test_sessions_login_logout() -> None:
    sessions = [("alice", "pts/0", "10.0.0.9", 1.7e9)]
    w = SessionsWatcher(ctx(), source=lambda: list(sessions))
    assert w.poll() == []
    sessions.append(("bob", "tty1", "", 1.7e9 + 5))
    (e,) = w.poll()
    assert (e.category, e.subcategory) == ("security", "login")
    assert e.summary == "user bob logged in on tty1" and e.actor == "bob"
    sessions.pop(0)
    (e,) = w.poll()
    assert e.subcategory == "logout" and "alice" in e.summary and "10.0.0.9" in e.summary


# --- filesystem ---------------------------------------------------------------------------------
def test_path_filter_skips_noise() -> None:
    s = FilesystemSettings()
    f = PathFilter(s.ignore_dirs, s.ignore_suffixes, roots=["/home/me/build"])
    keep = ["/home/me/build/src/main.py", "/etc/nixos/configuration.nix", "/x/app.tmpl"]
    skip = ["/home/me/build/.git/index", "/home/me/build/node_modules/x/y.js",
            "/home/me/build/target/debug/app", "/etc/nixos/.configuration.nix.swp",
            "/etc/nixos/configuration.nix~", "/etc/nixos/4913", "/tmp/x/file.tmp",
            "/x/.#lockfile", "/x/__pycache__/m.cpython-311.pyc", "/x/out.tmp.1234"]
    assert [p for p in keep if not f.keep(p)] == []
    assert [p for p in skip if f.keep(p)] == []


def test_tracker_coalesces_modifies_and_orders_create_before_delete() -> None:
    c = ctx()
    t = FileChangeTracker(c, PathFilter([".git"], [".swp"]), coalesce_s=60)
    events = t.batch({(1, "/w/a.nix"), (2, "/w/a.nix"), (3, "/w/a.nix"), (2, "/w/.git/x")})
    assert [(e.subcategory, e.metadata.path) for e in events] == [
        ("create", "/w/a.nix"), ("delete", "/w/a.nix")]
    assert t.filtered == 1
    assert [e.subcategory for e in t.batch({(2, "/w/b.nix")})] == ["modify"]
    for _ in range(10):
        c.clock.advance(1)  # type: ignore[attr-defined]
        assert t.batch({(2, "/w/b.nix")}) == []
    assert t.coalesced == 10
    c.clock.advance(60)  # type: ignore[attr-defined]
    assert [e.subcategory for e in t.batch({(2, "/w/b.nix")})] == ["modify"]


def test_a_new_directory_reports_what_it_already_holds(tmp_path: Path) -> None:
    """Files made in a directory before the watch reached it are never notified (pip install
    --target moves a whole tree in): they are read when the directory appears, once, and a late
    notification of one of them is not a second creation."""
    site = tmp_path / "site-x"
    (site / "tinypkg" / "__pycache__").mkdir(parents=True)
    (site / "tinypkg" / "__init__.py").write_text("VERSION = '1.0'\n")
    (site / "tinypkg-1.0.dist-info").mkdir()
    (site / "tinypkg-1.0.dist-info" / "METADATA").write_text("Name: tinypkg\n")
    (site / "tinypkg" / "__pycache__" / "x.pyc").write_bytes(b"")
    c = ctx()
    t = FileChangeTracker(c, PathFilter(["__pycache__"], [".pyc"], roots=[str(tmp_path)]),
                          coalesce_s=60)
    events = t.batch({(1, str(site))})
    assert sorted(e.metadata.path for e in events) == sorted(str(p) for p in (
        site, site / "tinypkg", site / "tinypkg" / "__init__.py", site / "tinypkg-1.0.dist-info",
        site / "tinypkg-1.0.dist-info" / "METADATA"))
    assert {e.subcategory for e in events} == {"create"}
    assert t.batch({(1, str(site / "tinypkg" / "__init__.py"))}) == []  # the late notice
    (site / "tinypkg" / "__init__.py").unlink()
    assert [e.subcategory for e in t.batch({(3, str(site / "tinypkg" / "__init__.py"))})] == [
        "delete"]
    (site / "tinypkg" / "__init__.py").write_text("again\n")
    assert [e.subcategory for e in t.batch({(1, str(site / "tinypkg" / "__init__.py"))})] == [
        "create"]  # made again after its deletion: a creation of its own


def test_filesystem_unavailable_when_no_path_exists(tmp_path: Path) -> None:
    w = FilesystemWatcher(ctx(), FilesystemSettings(paths=[str(tmp_path / "nope")]))
    assert "none of the configured paths exist" in (w.check_available() or "")
    w2 = FilesystemWatcher(ctx(), FilesystemSettings(paths=[str(tmp_path), "/nope"]))
    assert w2.check_available() is None and "/nope" in (w2.note or "")


def test_totalrecall_home_is_never_reported(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "trhome"
    monkeypatch.setenv("TOTALRECALL_HOME", str(home))
    w = FilesystemWatcher(ctx(), FilesystemSettings(paths=[str(tmp_path)],
                                                    ignore_paths=[str(tmp_path / "private")]))
    assert not w.filter.keep(str(home / "spool" / "watchers" / "x.json"))
    assert not w.filter.keep(str(tmp_path / "private" / "a.txt"))
    assert w.filter.keep(str(tmp_path / "notes.md"))


def test_storage_thresholds_per_path_and_for_inodes() -> None:
    from totalrecall_watchers.settings import StorageThresholds

    d = Disks()
    d.pct["/boot"] = 75.0
    s = StorageSettings(inode_warn_percent=50, thresholds={
        "/boot": StorageThresholds(warn_percent=70, critical_percent=85),
        "/home/": StorageThresholds(warn_percent=50.25, critical_percent=50.5)})
    w = StorageWatcher(ctx(), s, source=d)
    assert w.limits("/", "space") == (90.0, 95.0) and w.limits("/", "inode") == (50, 95.0)
    events = w.poll()
    assert [(e.metadata.path, e.subcategory) for e in events] == [("/boot", "space_warning")]
    assert events[0].metadata.model_extra["threshold_percent"] == 70
    d.pct["/home"] = 50.3  # fractional thresholds: a few MB can cross them
    (e,) = w.poll()
    assert (e.metadata.path, e.severity) == ("/home", Severity.WARNING)
    d.pct["/home"] = 50.6
    (e,) = w.poll()
    assert e.severity == Severity.CRITICAL and e.metadata.model_extra["level"] == "critical"
    d.pct["/home"] = 50.0  # hysteresis shrinks with the gap: back below warning → recovered
    (e,) = w.poll()
    assert "back to" in e.summary
    d.inode_pct["/"] = 55
    (e,) = w.poll()
    assert e.subcategory == "inode_warning" and e.metadata.path == "/"
