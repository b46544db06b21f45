"""Small tiers are searched exactly: on a quantized (int4) tier with a namespace filter, the
linear path returns the true nearest neighbours, in order (HNSW there lost ~5 points of LoCoMo
R@10 once the graph was built)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from totalrecall_indexer.adapters.zvec_schema import ZDoc
from totalrecall_indexer.adapters.zvec_tiers import ZvecTiers
from totalrecall_indexer.core.search import build_filter, tier_filter
from totalrecall_schema import VectorFilter


def test_linear_search_is_exact_on_a_filtered_int4_tier(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(8, 384))
    vecs = centres[rng.integers(0, 8, 2000)] + 0.6 * rng.normal(size=(2000, 384))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    spaces = [f"conv{i % 5}" for i in range(2000)]
    tiers = ZvecTiers(tmp_path / "zvec")
    tiers.open()
    try:
        tiers.upsert("cold", [ZDoc(key=f"k{i}", vector=[float(x) for x in v], namespace=spaces[i],
                                   category="conversation", subcategory="general",
                                   severity="info", ts_ms=1_600_000_000_000 + i, id=f"e{i}",
                                   summary=f"turn {i}") for i, v in enumerate(vecs)])
        tiers.optimize("cold")  # the HNSW graph exists: the linear path must not need it
        assert tiers.doc_count("cold") == 2000
        flt = build_filter(VectorFilter(namespace="conv3"))
        mine = np.array([i for i, s in enumerate(spaces) if s == "conv3"])
        for q in rng.normal(size=(20, 384)) + centres[rng.integers(0, 8, 20)]:
            q = q / np.linalg.norm(q)
            exact = [f"k{i}" for i in mine[np.argsort(-(vecs[mine] @ q))[:10]]]
            hits = tiers.search("cold", [float(x) for x in q], 10, flt, linear=True)
            assert [h.key for h in hits] == exact
    finally:
        tiers.close()


def test_a_copied_tier_is_searched_exactly_while_its_hnsw_is_built(tmp_path: Path) -> None:
    """The hot tier's exact searches come from its in-memory copy, which a build leaves alone
    (the tier's writes wait meanwhile): they go on during the build, where a search of zvec
    goes without the tier."""
    import threading

    from totalrecall_indexer.adapters.zvec_tiers import TierBuilding

    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(300, 384))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    tiers = ZvecTiers(tmp_path / "zvec", search_wait_s=0.05)
    tiers.open()
    try:
        tiers.upsert("hot", [ZDoc(key=f"k{i}", vector=[float(x) for x in v], namespace="ns",
                                  category="system.service", subcategory="general",
                                  severity="info", ts_ms=1_600_000_000_000 + i, id=f"e{i}",
                                  summary=f"line {i}") for i, v in enumerate(vecs)])
        assert tiers.has_mirror("hot")
        q = [float(x) for x in vecs[7]]
        flt = tier_filter(VectorFilter(namespace="ns"))  # as the searcher passes it
        building, release = threading.Event(), threading.Event()

        def build() -> None:  # a build in progress, as `optimize` brackets one
            with tiers._access.building("hot"):
                building.set()
                release.wait(30)

        builder = threading.Thread(target=build)
        builder.start()
        try:
            assert building.wait(10)
            hits = tiers.search("hot", q, 5, flt, linear=True)
            assert hits[0].key == "k7"
            try:
                tiers.search("hot", q, 5, flt, linear=False)
                raise AssertionError("zvec's own search ran during the build")
            except TierBuilding:
                pass
        finally:
            release.set()
            builder.join()
    finally:
        tiers.close()
