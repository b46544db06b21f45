"""The reclaimable-space watcher on a tree of its own: what it measures, when it speaks."""

from __future__ import annotations

from pathlib import Path

import pytest
from totalrecall_watchers.adapters.reclaimable import ReclaimableWatcher, measure, tree_bytes
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.settings import ReclaimableSettings

MiB = 2**20


def _file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(b"x" * size)


def _world(root: Path) -> None:
    _file(root / "var/log/journal/abc/system.journal", 3 * MiB)
    _file(root / "var/cache/apt/archives/foo_1.0_amd64.deb", 2 * MiB)
    _file(root / "home/alice/.cache/pip/http/aa/bb", 1 * MiB)
    _file(root / "root/.npm/_cacache/content-v2/sha512/x", 1 * MiB)
    gens = root / "nix/var/nix/profiles"
    gens.mkdir(parents=True)
    for n in (41, 42, 43):
        (gens / f"system-{n}-link").symlink_to("/nowhere")
    (gens / "system").symlink_to("system-43-link")


def _watcher(root: Path, **kw: object) -> ReclaimableWatcher:
    settings = ReclaimableSettings(root=str(root), min_total_bytes=4 * MiB, **kw)  # type: ignore[arg-type]
    return ReclaimableWatcher(EventContext(hostname="ws", clock=FakeClock()), settings)


def test_it_measures_each_place_and_says_how_to_free_it(tmp_path: Path) -> None:
    _world(tmp_path)
    found = {f.what: f for f in measure(tmp_path)}
    assert set(found) == {"systemd journal", "apt package cache", "pip cache", "npm cache",
                          "NixOS system generations"}
    assert found["systemd journal"].bytes >= 3 * MiB
    assert found["apt package cache"].command == "apt-get clean"
    assert found["NixOS system generations"].count == 2  # the current one is not counted
    assert found["pip cache"].path.endswith("home/alice/.cache/pip")


def test_one_event_then_only_on_a_real_change(tmp_path: Path) -> None:
    _world(tmp_path)
    w = _watcher(tmp_path)
    [ev] = w.poll()
    assert ev.category == "system.storage" and ev.subcategory == "reclaimable"
    assert "could be reclaimed (not deleted)" in ev.summary and "systemd journal" in ev.summary
    assert "journalctl --vacuum-time=2weeks" in ev.detail and "pip cache purge" in ev.detail
    md = ev.metadata.model_extra or {}
    assert md["total_bytes"] >= 7 * MiB
    assert {i["what"] for i in md["items"]} >= {"systemd journal", "npm cache"}
    assert w.poll() == []  # nothing moved
    _file(tmp_path / "var/log/journal/abc/user-1000.journal", 1 * MiB)
    assert w.poll() == []  # under a quarter more
    _file(tmp_path / "var/cache/apt/archives/big.deb", 6 * MiB)
    [grown] = w.poll()
    assert (grown.metadata.model_extra or {})["total_bytes"] > md["total_bytes"]


def test_under_the_minimum_it_is_quiet_and_says_once_when_it_drops(tmp_path: Path) -> None:
    _file(tmp_path / "root/.cache/pip/x", 1 * MiB)
    w = _watcher(tmp_path)
    assert w.poll() == []
    _file(tmp_path / "var/log/journal/j", 5 * MiB)
    assert len(w.poll()) == 1
    (tmp_path / "var/log/journal/j").unlink()
    [down] = w.poll()
    assert "nothing worth cleaning" in down.summary
    assert w.poll() == []


def test_hard_links_count_once_and_the_walk_is_bounded(tmp_path: Path) -> None:
    _file(tmp_path / "a/one", 1 * MiB)
    (tmp_path / "a/two").hardlink_to(tmp_path / "a/one")
    size, partial = tree_bytes(tmp_path / "a")
    assert MiB <= size < 2 * MiB and not partial
    for i in range(5):
        _file(tmp_path / f"b/{i}", 10)
    assert tree_bytes(tmp_path / "b", max_files=3)[1] is True


def test_a_place_it_may_not_read_is_left_out_not_a_failed_poll(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watcher not run as root (a container's user) under /root: stat says EACCES, which
    Path.is_dir raises on Python 3.11 (once a traceback every poll, and no report at all)."""
    _world(tmp_path)
    denied = tmp_path / "root/.npm/_cacache"
    is_dir = Path.is_dir

    def guarded(self: Path) -> bool:
        if self == denied:
            raise PermissionError(13, "Permission denied", str(self))
        return is_dir(self)

    monkeypatch.setattr(Path, "is_dir", guarded)
    found = {f.what for f in measure(tmp_path)}
    assert "npm cache" not in found
    assert {"systemd journal", "apt package cache", "pip cache"} <= found
