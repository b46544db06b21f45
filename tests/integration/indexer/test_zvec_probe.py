"""A tier whose HNSW build was interrupted is opened in a child process first (adapters/zvec_probe.py):
a native crash there quarantines the tier instead of crashing the indexer at every restart."""

from __future__ import annotations

from pathlib import Path

from indexer_it_helpers import unit_vectors
from totalrecall_indexer.adapters.zvec_probe import crash_on_open
from totalrecall_indexer.adapters.zvec_schema import ZDoc
from totalrecall_indexer.adapters.zvec_tiers import ZvecTiers

_SEGFAULT = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"


def _filled(root: Path, n: int = 50) -> ZvecTiers:
    tiers = ZvecTiers(root)
    tiers.open()
    vecs = unit_vectors(n, seed=5)
    tiers.upsert("hot", [ZDoc(key=f"k{i}", vector=vecs[i].tolist(), namespace="ns",
                              category="note", subcategory="", severity="info", ts_ms=i,
                              id=f"k{i}", summary=f"memory {i}")
                         for i in range(n)])
    tiers.close()
    return tiers


def test_crash_on_open_tells_a_crash_a_hang_and_a_healthy_collection(tmp_path: Path) -> None:
    _filled(tmp_path / "zvec")
    assert crash_on_open(tmp_path / "zvec" / "hot") is None
    crashed = crash_on_open(tmp_path / "zvec" / "hot", code=_SEGFAULT)
    assert crashed is not None and "SIGSEGV" in crashed
    hung = crash_on_open(tmp_path / "zvec" / "hot", timeout_s=1, code="import time\ntime.sleep(30)")
    assert hung is not None and "did not open" in hung
    # an exception is zvec refusing, not a crash: ZvecTiers.open handles it itself
    assert crash_on_open(tmp_path / "nowhere", code="raise RuntimeError('no')") is None


def test_a_tier_that_crashes_the_child_is_quarantined_and_reindexed(tmp_path: Path) -> None:
    root = tmp_path / "zvec"
    _filled(root)
    probed: list[Path] = []

    def crashes(path: Path) -> str | None:
        probed.append(path)
        return "zvec crashed opening it (SIGSEGV, in a child process)"

    tiers = ZvecTiers(root, probe=crashes)
    tiers.open()  # no build was interrupted: no tier is probed
    assert probed == [] and tiers.quarantined == []
    assert tiers.cols["hot"].stats.doc_count == 50
    tiers.close()

    tiers.markers.begin("hot")  # as a kill inside the hot tier's build leaves it
    tiers = ZvecTiers(root, probe=crashes)
    tiers.open()
    try:
        assert probed == [root / "hot"]
        assert tiers.quarantined == ["hot"]
        assert "SIGSEGV" in tiers.reindex["hot"]  # re-indexed from Postgres by the indexer
        assert tiers.cols["hot"].stats.doc_count == 0
        assert "hot" not in tiers.held and tiers.markers.pending() == {}
        assert len(list(root.glob("hot.broken-*"))) == 1
    finally:
        tiers.close()
