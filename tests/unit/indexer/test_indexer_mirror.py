"""The in-memory mirror of a tier (adapters/vector_mirror.py) answers an exact search as
zvec's own exact scan of an fp32 tier does, with real zvec: after upserts, replacements, deletes, tier moves, a
failed write, growth past its size limit, a restart and a reset."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from totalrecall_indexer.adapters.vector_mirror import VectorMirror
from totalrecall_indexer.adapters.zvec_schema import ZDoc
from totalrecall_indexer.adapters.zvec_tiers import TierBuilding, ZvecTiers
from totalrecall_indexer.core.search import TierFilter

DIM = 384
CATS, SEVS, SPACES = ["a", "b", "c"], ["info", "error"], ["ns0", "ns1", "ns2"]
T0 = 1_700_000_000_000


def _docs(start: int, stop: int, seed: int = 0) -> list[ZDoc]:
    rng = np.random.default_rng(seed * 100_000 + start)
    centres = np.random.default_rng(5).normal(size=(6, DIM))
    out = []
    for i in range(start, stop):
        v = centres[i % 6] + 0.8 * rng.normal(size=DIM)
        out.append(ZDoc(key=f"k{i}", vector=[float(x) for x in v * rng.uniform(0.5, 2.0)],
                        namespace=SPACES[i % 3], category=CATS[i % 3 - 1 if i % 2 else 2],
                        subcategory="s", severity=SEVS[i % 2], ts_ms=T0 + i * 1000,
                        id=f"e{i}-{seed}", summary=f"memory {i} v{seed}"))
    return out


FILTERS = [None, TierFilter(namespace="ns1"), TierFilter(namespace="nope"),
           TierFilter(namespace="ns0", since_ms=T0 + 300_000),
           TierFilter(namespace="ns2", since_ms=T0 + 100_000, until_ms=T0 + 400_000),
           TierFilter(namespace="ns1", categories=("a", "c"), severities=("error",)),
           TierFilter(namespace="ns0", categories=("zz",)),
           TierFilter(until_ms=T0 + 50_000)]


def _same_as_zvec(tiers: ZvecTiers, tier: str = "hot", queries: int = 6) -> int:
    """Every filter, several queries: the mirror's hits are zvec's exact scan's (keys in order,
    scores, fields). Returns how many hits were compared."""
    rng = np.random.default_rng(queries)
    compared = 0
    for q in rng.normal(size=(queries, DIM)):
        vec = [float(x) for x in q]
        for flt in FILTERS:
            for topk in (1, 10, 40):
                mine = tiers.search(tier, vec, topk, flt, linear=True)
                theirs = tiers.search(tier, vec, topk, None if flt is None else flt.zvec(),
                                      linear=True)  # a string filter: zvec's scan
                assert [h.key for h in mine] == [h.key for h in theirs], flt
                for a, b in zip(mine, theirs, strict=True):
                    assert a.distance == pytest.approx(b.distance, abs=1e-5)
                    assert a.fields == b.fields
                compared += len(mine)
    return compared


@pytest.fixture
def tiers(tmp_path: Path) -> Any:
    t = ZvecTiers(tmp_path / "zvec", mirror_max_docs=500)
    t.open()
    yield t
    t.close()


def test_the_mirror_answers_as_zvecs_exact_scan(tiers: ZvecTiers) -> None:
    assert _same_as_zvec(tiers) == 0  # empty
    tiers.upsert("hot", _docs(0, 300))
    assert len(tiers._mirrors["hot"]) == 300
    assert _same_as_zvec(tiers) > 0
    tiers.upsert("hot", _docs(100, 160, seed=1))  # replaced: new vectors and fields
    tiers.upsert("hot", [replace(d, namespace=SPACES[(i + 1) % 3])  # and namespaces
                         for i, d in enumerate(_docs(160, 200, seed=2))])
    tiers.delete("hot", [f"k{i}" for i in range(0, 300, 7)] + ["never-there"])
    assert len(tiers._mirrors["hot"]) == len(_ids(tiers))
    _same_as_zvec(tiers)
    # a tier move (compaction): into warm, out of hot
    moved = _docs(200, 260, seed=1)
    tiers.upsert("warm", moved)
    tiers.delete("hot", [d.key for d in moved])
    _same_as_zvec(tiers)
    assert len(tiers._mirrors["warm"]) == len(moved)  # quantized tiers are copied too


def test_a_quantized_tiers_copy_answers_as_an_fp32_scan_of_its_documents(tiers: ZvecTiers
                                                                          ) -> None:
    """warm (int8) and cold (int4): their copies hold the fp32 vectors zvec keeps beside the
    codes, so they answer as zvec's exact scan of the same documents in the fp32 tier does."""
    docs = _docs(0, 300, seed=3)
    for tier in ("hot", "warm", "cold"):
        tiers.upsert(tier, docs)
    assert all(len(tiers._mirrors[t]) == 300 for t in ("warm", "cold"))
    rng = np.random.default_rng(11)
    compared = 0
    for q in rng.normal(size=(6, DIM)):
        vec = [float(x) for x in q]
        for flt in FILTERS:
            theirs = tiers.search("hot", vec, 40, None if flt is None else flt.zvec(),
                                  linear=True)  # a string filter: zvec's fp32 scan
            for tier in ("warm", "cold"):
                mine = tiers.search(tier, vec, 40, flt, linear=True)
                assert [h.key for h in mine] == [h.key for h in theirs]
                for a, b in zip(mine, theirs, strict=True):
                    assert a.distance == pytest.approx(b.distance, abs=1e-5)
                compared += len(mine)
    assert compared > 0


def _ids(tiers: ZvecTiers) -> set[str]:
    col = tiers.cols["hot"]
    return {d.id for d in col.query(topk=10_000)}


def test_the_mirror_survives_a_restart_and_a_reset(tmp_path: Path) -> None:
    t = ZvecTiers(tmp_path / "zvec", mirror_max_docs=500)
    t.open()
    t.upsert("hot", _docs(0, 200))
    t.delete("hot", ["k3", "k4"])
    t.close()
    t = ZvecTiers(tmp_path / "zvec", mirror_max_docs=500)
    t.open()
    try:
        assert len(t._mirrors["hot"]) == 198
        _same_as_zvec(t)
        t.reset(DIM, "other-model")
        assert len(t._mirrors["hot"]) == 0
        assert t.search("hot", _docs(0, 1)[0].vector, 5, TierFilter(namespace="ns0"),
                        linear=True) == []
    finally:
        t.close()


def test_a_tier_too_large_is_not_mirrored_and_comes_back_when_small(tiers: ZvecTiers,
                                                                     monkeypatch: Any) -> None:
    tiers.upsert("hot", _docs(0, 480))
    assert "hot" in tiers._mirrors
    tiers.upsert("hot", _docs(480, 520))
    assert "hot" not in tiers._mirrors  # over 500: searched by zvec
    _same_as_zvec(tiers, queries=2)
    tiers.delete("hot", [f"k{i}" for i in range(100)])
    assert "hot" not in tiers._mirrors  # looked at again only after MIRROR_RETRY_S
    monkeypatch.setattr("totalrecall_indexer.adapters.zvec_writes.MIRROR_RETRY_S", 0.0)
    tiers.delete("hot", ["k100"])
    assert len(tiers._mirrors["hot"]) == 419
    _same_as_zvec(tiers, queries=2)


def test_a_failed_write_drops_the_mirror(tiers: ZvecTiers, monkeypatch: Any) -> None:
    tiers.upsert("hot", _docs(0, 50))
    bad = _docs(50, 51)[0]
    bad.vector = bad.vector[:10]  # zvec refuses the batch
    with pytest.raises(ValueError):
        tiers.upsert("hot", [*_docs(51, 60), bad])
    assert "hot" not in tiers._mirrors
    _same_as_zvec(tiers, queries=2)  # zvec answers meanwhile
    tiers.upsert("hot", _docs(60, 70))
    assert "hot" not in tiers._mirrors  # not before MIRROR_RETRY_S …
    tiers.optimize("hot")  # … or a build (which also ends the hold of a failed write)
    assert len(tiers._mirrors["hot"]) == len(_ids(tiers)) == 60
    tiers.delete("hot", ["k0"])
    with pytest.raises(ValueError):
        tiers.upsert("hot", [bad])
    monkeypatch.setattr("totalrecall_indexer.adapters.zvec_writes.MIRROR_RETRY_S", 0.0)
    tiers.upsert("hot", _docs(70, 80))
    assert len(tiers._mirrors["hot"]) == len(_ids(tiers)) == 69
    _same_as_zvec(tiers, queries=2)


def test_compaction_of_replaced_rows_keeps_the_answers() -> None:
    m = VectorMirror(DIM)
    for seed in range(6):  # each round replaces every doc: dead rows pile up, then go
        m.upsert(_docs(0, 400, seed=seed))
    assert len(m) == 400 and sum(s._n for s in m._spaces.values()) <= 2 * 400 + 3 * 64
    hits = m.search(_docs(0, 400, seed=5)[5].vector, 3, TierFilter(namespace="ns2"))
    assert hits[0].key == "k5" and hits[0].fields["summary"] == "memory 5 v5"
    assert hits[0].distance == pytest.approx(0.0, abs=1e-6)


def test_copies_of_one_text_come_newest_first_even_at_the_cut() -> None:
    m = VectorMirror(DIM)
    one = _docs(0, 1)[0]
    copies = [ZDoc(key=f"c{i}", vector=one.vector, namespace="ns0", category="a",
                   subcategory="s", severity="info", ts_ms=T0 + (i * 7919) % 50, id=f"e{i}",
                   summary="same text") for i in range(50)]
    m.upsert(copies)
    hits = m.search(one.vector, 5, TierFilter(namespace="ns0"))
    newest = sorted(copies, key=lambda d: (-d.ts_ms, d.key))[:5]
    assert [h.key for h in hits] == [d.key for d in newest]


def test_a_mirror_that_cannot_follow_a_write_goes_not_the_write(tiers: ZvecTiers,
                                                                 monkeypatch: Any) -> None:
    tiers.upsert("hot", _docs(0, 50))

    def broken(self: VectorMirror, docs: Any) -> None:
        raise MemoryError("no room")

    with monkeypatch.context() as m:
        m.setattr(VectorMirror, "upsert", broken)
        assert tiers.upsert("hot", _docs(50, 60)) == 10  # zvec has them
    assert "hot" not in tiers._mirrors
    assert len(_ids(tiers)) == 60
    _same_as_zvec(tiers, queries=2)


def test_searches_beside_writes_and_reloads(tiers: ZvecTiers, monkeypatch: Any) -> None:
    """Searches in threads while a writer upserts, deletes and (every write) reloads the copy:
    no search fails, none returns a key deleted before it started, and the end state is zvec's."""
    import threading

    monkeypatch.setattr("totalrecall_indexer.adapters.zvec_writes.MIRROR_RETRY_S", 0.0)
    tiers.upsert("hot", _docs(0, 200))
    gone: set[str] = set()
    errors: list[BaseException] = []
    done = threading.Event()
    q = _docs(0, 1)[0].vector

    def searcher() -> None:
        try:
            while not done.is_set():
                deleted_before = set(gone)
                try:
                    hits = tiers.search("hot", q, 40, TierFilter(namespace="ns0"), linear=True)
                except TierBuilding:  # busy past its wait: the searcher goes without the tier
                    continue
                for h in hits:
                    assert h.key not in deleted_before
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(200, 260, 5):
            tiers.upsert("hot", _docs(i, i + 5))
            keys = [f"k{j}" for j in range(i - 200, i - 195)]
            tiers.delete("hot", keys)
            gone.update(keys)
            if "hot" in tiers._mirrors:
                tiers._mirrors.pop("hot")  # dropped: the next write loads it again
    finally:
        done.set()
        for t in threads:
            t.join()
    assert not errors
    tiers.upsert("hot", _docs(300, 301))
    assert len(tiers._mirrors["hot"]) == len(_ids(tiers))
    _same_as_zvec(tiers, queries=2)


_THRESHOLD_PROBE = """
from dataclasses import replace
from bench.indexer_memory import mmap_threshold_kb
from totalrecall_indexer.core.search import TierFilter
from totalrecall_indexer.adapters.vector_mirror import VectorMirror
from tests.unit.indexer.test_indexer_mirror import _docs

before = mmap_threshold_kb()
m = VectorMirror(384)
for start in range(0, 6000, 500):  # one namespace, its arrays grown by half time after time
    m.upsert(replace(d, namespace="ns0") for d in _docs(start, start + 500))
q = _docs(0, 1)[0].vector
m.search(q, 10, TierFilter(namespace="ns0", since_ms=0))  # all rows
m.search(q, 10, TierFilter(namespace="ns0", categories=("a",)))  # a gather
m.delete([f"k{i}" for i in range(0, 6000, 2)])  # compacted
del m
print(before, mmap_threshold_kb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_copy_leaves_mallocs_mmap_threshold_alone() -> None:
    """glibc raises its mmap threshold to the largest mapped block freed, and from then on
    keeps what is freed below that size in its heaps: the copy's arrays, grown, compacted and
    dropped, must not be such blocks, or the indexer holds ever more memory after the copy is
    gone (a fresh interpreter: the threshold is process-wide)."""
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = subprocess.run([sys.executable, "-c", _THRESHOLD_PROBE], cwd=root, env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    before, after = (int(x) for x in out.split())
    if before < 0:
        pytest.skip("not glibc's malloc")
    # 6,000 rows of 384 floats: the vectors' arrays reach MBs (malloc'd, they raised it to
    # their size); the copy's Python dicts and lists, and the probe's own step, stay below 2 MB.
    assert after <= max(before, 2048), (before, after)
