"""Zvec on a full state disk (adapters/disk_space.py), in-process with real zvec: a write, build
or quarantine is refused while the disk is below the margin (zvec would die of SIGBUS writing,
and cannot replay its log to open a tier); a tier that cannot be opened then is not taken for a
broken one; a quarantine records its re-index before it moves anything; a write hold whose
marker cannot be written still has the tier checked. The real full disk (a tmpfs) is in
tests/integration/indexer/test_indexer_disk_full.py."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest
from totalrecall_indexer.adapters.disk_space import SpaceGuard, StateDiskFull
from totalrecall_indexer.adapters.zvec_tiers import ZvecTiers
from zvec_docs import unit_docs

DIM = 384
MIB = 2**20




class Disk:
    """The free bytes the tiers see, set by the test."""

    def __init__(self, free: int) -> None:
        self.free = free

    def __call__(self, _path: Path) -> int:
        return self.free


def _tiers(root: Path, disk: Disk) -> ZvecTiers:
    t = ZvecTiers(root, min_free_bytes=64 * MIB, free=disk)
    t.open()
    return t


def _break(tier_dir: Path) -> None:
    """A collection zvec refuses to open (no manifest; what a kill in create_and_open leaves)."""
    for f in tier_dir.glob("manifest*"):
        f.unlink()


def test_the_guard_names_the_margin_and_is_an_enospc() -> None:
    guard = SpaceGuard(Path("/"), 64 * MIB, free=lambda _p: 3 * MIB)
    assert guard.low()
    with pytest.raises(StateDiskFull) as exc:
        guard.check("a write to zvec tier hot")
    assert exc.value.errno == errno.ENOSPC and isinstance(exc.value, OSError)
    assert "3.0 MiB free" in str(exc.value) and "64 MiB" in str(exc.value)
    assert not SpaceGuard(Path("/"), 0, free=lambda _p: 0).low()  # 0: no margin
    SpaceGuard(Path("/"), 0, free=lambda _p: 0).check("anything")


def test_writes_and_builds_wait_for_space_and_nothing_is_half_written(tmp_path: Path) -> None:
    disk = Disk(10 * 2**30)
    tiers = _tiers(tmp_path / "zvec", disk)
    try:
        tiers.upsert("hot", unit_docs(0, 10))
        disk.free = MIB
        with pytest.raises(StateDiskFull):
            tiers.upsert("hot", unit_docs(10, 20))
        with pytest.raises(StateDiskFull):
            tiers.delete("hot", ["k0"])
        with pytest.raises(StateDiskFull):
            tiers.optimize("hot")
        assert tiers.count("hot") == 10  # the refused write left nothing behind
        assert tiers.held == {} and tiers.reindex == {}  # a full disk is no damage
        assert tiers.markers.pending() == {}
        disk.free = 10 * 2**30  # space is back: the same write goes through
        assert tiers.upsert("hot", unit_docs(10, 20)) == 10
        assert sorted(tiers.keys("hot"), key=lambda k: int(k[1:])) == [f"k{i}" for i in range(20)]
    finally:
        tiers.close()


def test_a_tier_that_cannot_be_opened_on_a_full_disk_is_waited_for_not_quarantined(
        tmp_path: Path) -> None:
    root = tmp_path / "zvec"
    disk = Disk(10 * 2**30)
    tiers = _tiers(root, disk)
    tiers.upsert("warm", unit_docs(0, 5))
    tiers.close()
    _break(root / "warm")
    disk.free = MIB
    again = ZvecTiers(root, min_free_bytes=64 * MIB, free=disk)
    with pytest.raises(StateDiskFull, match="opening zvec tier warm"):
        again.open()
    # What opened stays open (closed on a full disk it would lose its unsaved writes), and a
    # retried open() goes on from the tier that could not be opened.
    assert list(again.cols) == ["hot"]
    assert (root / "warm").is_dir() and not list(root.glob("warm.broken-*"))
    assert json.loads((root / "meta.json").read_text())["reindex"] == {}
    disk.free = 10 * 2**30  # with space, a tier that still cannot be opened is quarantined
    again.open()
    try:
        assert again.quarantined == ["warm"] and "warm" in again.reindex
        assert sorted(again.cols) == ["cold", "hot", "warm"]
        assert len(list(root.glob("warm.broken-*"))) == 1
    finally:
        again.close()


def test_a_quarantine_records_its_reindex_before_it_moves_the_tier(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "zvec"
    tiers = _tiers(root, Disk(10 * 2**30))
    tiers.upsert("cold", unit_docs(0, 5))
    tiers.close()
    _break(root / "cold")
    again = ZvecTiers(root)

    def refused(*_a: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(again, "_write_meta", refused)
    with pytest.raises(OSError):
        again.open()
    # Nothing moved: the next open finds the same broken tier, not an empty one that nothing
    # says must be refilled.
    assert (root / "cold").is_dir() and not list(root.glob("cold.broken-*"))
    monkeypatch.undo()
    again = ZvecTiers(root)
    again.open()
    try:
        assert "cold" in again.reindex
        assert "cold" in json.loads((root / "meta.json").read_text())["reindex"]
    finally:
        again.close()


def test_a_write_hold_whose_marker_cannot_be_written_still_has_the_tier_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiers = _tiers(tmp_path / "zvec", Disk(10 * 2**30))
    try:
        def refused(*_a: Any, **_k: Any) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(tiers.markers, "begin", refused)
        monkeypatch.setattr(tiers, "_write_meta", refused)
        tiers.hold("hot", "zvec upsert failed")
        assert "hot" in tiers.held and "hot" in tiers.reindex  # in this process
        monkeypatch.undo()  # space is back
        tiers.optimize("hot")  # lifts the hold
        tiers.upsert("hot", unit_docs(0, 1))  # meta.json is written before this write
        assert "hot" in json.loads((tiers.meta_path).read_text())["reindex"]
    finally:
        tiers.close()


def test_a_tier_larger_than_a_query_page_is_listed_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """zvec answers at most 100,000 documents a query: the consistency check lists a larger
    tier by halves of its time range (here with a page of 40)."""
    import totalrecall_indexer.adapters.zvec_reads as zr

    monkeypatch.setattr(zr, "LIST_PAGE", 40)
    tiers = _tiers(tmp_path / "zvec", Disk(10 * 2**30))
    try:
        tiers.upsert("warm", unit_docs(0, 130))
        assert sorted(tiers.keys("warm"), key=lambda k: int(k[1:])) == \
            [f"k{i}" for i in range(130)]
        tiers.upsert("cold", unit_docs(0, 40))  # exactly one page
        assert len(tiers.keys("cold")) == 40
    finally:
        tiers.close()
