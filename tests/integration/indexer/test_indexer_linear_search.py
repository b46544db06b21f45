"""Small tiers are searched exactly: on a quantized (int4) tier with a namespace filter, the
linear path returns the true nearest neighbours, in order (HNSW there lost ~5 points of LoCoMo
R@10 once the graph was built)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from totalrecall_indexer.core.search import build_filter
from totalrecall_indexer.stores.zvec_schema import ZDoc
from totalrecall_indexer.stores.zvec_tiers import ZvecTiers
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
