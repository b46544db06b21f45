"""The guard around zvec's HNSW builds (adapters/build_guard.py), in-process with real zvec: a marker
left by an interrupted build holds the tier's writes until a build completed; a failed zvec write
holds them too; writes wait while a build runs; the indexer redelivers instead of dead-lettering.
The real kills are in tests/integration/indexer/test_indexer_build_crash.py."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from totalrecall_indexer.adapters.build_guard import BuildMarkers
from totalrecall_indexer.adapters.markdown_log import MarkdownLog
from totalrecall_indexer.adapters.zvec_tiers import TierBuilding, TierUnavailable, ZvecTiers
from totalrecall_indexer.core.indexer import Indexer, StoreUnavailable
from totalrecall_indexer.metrics import Metrics
from totalrecall_schema import EmbeddedEvent, EmbedReply, MemoryEvent
from zvec_docs import unit_docs

DIM = 384




@pytest.fixture
def tiers(tmp_path: Path) -> Any:
    t = ZvecTiers(tmp_path / "zvec")
    t.open()
    yield t
    t.close()


def _reopen(t: ZvecTiers) -> ZvecTiers:
    t.close()
    fresh = ZvecTiers(t.root)
    fresh.open()
    return fresh


def test_markers_are_durable_files(tmp_path: Path) -> None:
    m = BuildMarkers(tmp_path)
    assert m.pending() == {}
    m.begin("warm")
    m.begin("cold", "a write failed")
    assert set(m.pending()) == {"warm", "cold"}
    assert "a write failed" in m.pending()["cold"]
    m.end("warm")
    m.end("warm")  # idempotent
    assert set(m.pending()) == {"cold"}
    assert not list(tmp_path.glob("*.tmp"))


def test_interrupted_build_holds_writes_until_a_build_completed(tiers: ZvecTiers) -> None:
    tiers.upsert("warm", unit_docs(0, 50))
    tiers.markers.begin("warm")  # what a kill inside optimize() leaves behind
    tiers = _reopen(tiers)
    try:
        assert list(tiers.held) == ["warm"] and "interrupted" in tiers.held["warm"]
        assert list(tiers.reindex) == ["warm"]  # checked against Postgres after the build
        assert len(tiers.fetch("warm", [f"k{i}" for i in range(50)])) == 50  # reads go on
        with pytest.raises(TierUnavailable):
            tiers.upsert("warm", unit_docs(50, 51))
        with pytest.raises(TierUnavailable):
            tiers.delete("warm", ["k0"])
        tiers.upsert("hot", unit_docs(100, 101))  # the other tiers are not affected
        tiers.optimize("warm")
        assert tiers.held == {} and tiers.markers.pending() == {}
        tiers.upsert("warm", unit_docs(50, 60))
        assert tiers.stats()["warm"]["doc_count"] == 60
    finally:
        tiers.close()


def test_marker_of_a_tier_started_empty_is_dropped(tiers: ZvecTiers) -> None:
    tiers.markers.begin("cold")
    tiers.close()
    import shutil

    shutil.rmtree(tiers.root / "cold")  # e.g. quarantined, or never created
    tiers = _reopen(tiers)
    try:
        assert tiers.held == {} and tiers.markers.pending() == {}
    finally:
        tiers.close()


def test_reset_drops_markers_and_holds(tiers: ZvecTiers) -> None:
    tiers.hold("hot", "test")
    tiers.reset(DIM, "m")
    assert tiers.held == {} and tiers.markers.pending() == {}


class _FailingUpserts:
    """A collection whose upserts report failure, as zvec does after an interrupted build."""

    def __init__(self, col: Any) -> None:
        self.col = col

    def upsert(self, docs: list[Any]) -> list[Any]:
        class Bad:
            def ok(self) -> bool:
                return False

            def code(self) -> str:
                return "INTERNAL_ERROR"

            def message(self) -> str:
                return ""

        return [Bad() for _ in docs]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.col, name)


def test_failed_write_holds_the_tier_across_a_restart(tiers: ZvecTiers) -> None:
    real = tiers.cols["hot"]
    tiers.cols["hot"] = _FailingUpserts(real)
    with pytest.raises(TierUnavailable, match="upsert failed for 3 of 3"):
        tiers.upsert("hot", unit_docs(0, 3))
    assert "hot" in tiers.held and "hot" in tiers.markers.pending()
    assert "upsert failed" in tiers.reindex["hot"]
    tiers.cols["hot"] = real
    tiers = _reopen(tiers)
    try:
        assert "hot" in tiers.held
        tiers.optimize("hot")
        tiers.upsert("hot", unit_docs(0, 3))
    finally:
        tiers.close()


def test_writes_wait_while_the_tier_builds(tiers: ZvecTiers) -> None:
    tiers.upsert("warm", unit_docs(0, 20))
    building, release = threading.Event(), threading.Event()
    real = tiers.cols["warm"]

    class SlowBuild:
        def optimize(self) -> None:
            building.set()
            assert release.wait(10)
            real.optimize()

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    tiers.cols["warm"] = SlowBuild()
    builder = threading.Thread(target=tiers.optimize, args=("warm",))
    builder.start()
    assert building.wait(10)
    wrote = threading.Event()
    writer = threading.Thread(target=lambda: (tiers.upsert("warm", unit_docs(20, 30)), wrote.set()))
    writer.start()
    other = tiers.upsert("cold", unit_docs(100, 101))  # other tiers are not blocked
    assert other == 1
    assert not wrote.wait(0.3), "a write ran during the tier's build"
    # A search of the tier goes without it at once, neither behind the build nor beside it
    # (zvec hangs when a build starts under queries: adapters/build_exclusion.py).
    t0 = time.monotonic()
    with pytest.raises(TierBuilding):
        tiers.search("warm", unit_docs(0, 1)[0].vector, 1, None)
    assert time.monotonic() - t0 < 2.0
    assert len(tiers.search("cold", unit_docs(100, 101)[0].vector, 1, None)) == 1  # other tiers answer
    release.set()
    builder.join(10)
    assert wrote.wait(10)
    writer.join(10)
    tiers.cols["warm"] = real
    assert tiers.stats()["warm"]["doc_count"] == 30
    assert len(tiers.search("warm", unit_docs(0, 1)[0].vector, 1, None)) == 1  # and after it


class _NoPg:
    def __init__(self) -> None:
        self.upserts = 0

    async def upsert(self, rows: Any) -> None:
        self.upserts += 1

    async def count(self) -> int:
        return 0


async def test_indexer_redelivers_while_a_tier_is_held(tmp_path: Path) -> None:
    tiers = ZvecTiers(tmp_path / "zvec")
    tiers.open()
    pg = _NoPg()
    idx = Indexer(markdown=MarkdownLog(tmp_path / "memory"), pg=pg,  # type: ignore[arg-type]
                  tiers=tiers, metrics=Metrics())
    try:
        tiers.upsert("hot", unit_docs(0, 5))
        tiers.hold("hot", "its HNSW build was interrupted")
        vec = unit_docs(10, 11)[0].vector
        ev = EmbeddedEvent(event=MemoryEvent(id="x1", summary="s",
                                             timestamp=datetime.now(UTC) - timedelta(minutes=1)),
                           vector=vec, model="m")
        with pytest.raises(StoreUnavailable, match="takes no writes"):
            await idx.index_batch([ev])
        assert pg.upserts == 0  # nothing written anywhere: all stores or none
        assert idx.builds_wanted.is_set()
        with pytest.raises(StoreUnavailable):
            await idx.forget(["k0"])
        done = await idx.finish_held_builds()
        assert list(done) == ["hot"] and tiers.held == {}
        assert idx.metrics.build_repairs.labels(tier="hot")._value.get() == 1
        res = await idx.index_batch([ev])
        assert res.indexed == 1 and pg.upserts == 1
    finally:
        tiers.close()


class _TierPg(_NoPg):
    """Postgres says these rows are in `tier` (embedded with model "m")."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        super().__init__()
        self.rows = rows

    async def tier_page(self, tier: str, model: str | None, after: str,
                        limit: int) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["key"] > after][:limit]

    async def keys_in_tier(self, keys: list[str], tier: str) -> set[str]:
        return {r["key"] for r in self.rows} & set(keys)


async def test_check_after_an_interrupted_build_reindexes_only_what_zvec_lacks(
        tmp_path: Path) -> None:
    tiers = ZvecTiers(tmp_path / "zvec")
    tiers.open()
    docs = unit_docs(0, 6)
    tiers.upsert("warm", docs[:4])  # k4 and k5 were lost by zvec
    tiers.upsert("cold", docs[4:5])  # k4 was moved by a compaction Postgres did not see
    tiers.model = "m"
    now = datetime.now(UTC)
    pg = _TierPg([{"key": d.key, "id": d.id, "namespace": "default", "ts": now,
                   "category": "c", "subcategory": "s", "severity": "info",
                   "summary": d.summary, "detail": ""} for d in docs])
    idx = Indexer(markdown=MarkdownLog(tmp_path / "memory"), pg=pg,  # type: ignore[arg-type]
                  tiers=tiers, metrics=Metrics())
    asked: list[str] = []

    async def embed(texts: list[str]) -> EmbedReply:
        asked.extend(texts)
        return EmbedReply(vectors=[docs[5].vector for _ in texts], model="m", dim=DIM)

    try:
        tiers.hold("warm", "its HNSW build was interrupted")
        assert "warm" in tiers.reindex
        with pytest.raises(StoreUnavailable):  # not before the build completed
            await idx.reindex_tiers(embed)
        await idx.finish_held_builds()
        assert idx.reindex_wanted.is_set()
        assert await idx.reindex_tiers(embed) == {"warm": 1}
        assert asked == ["memory 5"]
        assert tiers.reindex == {} and "k5" in tiers.fetch("warm", ["k5"])
        assert idx.metrics.reindexed.labels(tier="warm")._value.get() == 1
    finally:
        tiers.close()
