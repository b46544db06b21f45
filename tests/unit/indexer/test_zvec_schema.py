"""Each tier's collection is created with its own HNSW build effort (`EF_CONSTRUCTION`), and the
collection keeps it on disk across a reopen (real zvec)."""

from __future__ import annotations

from pathlib import Path

import zvec
from totalrecall_indexer.adapters.zvec_schema import EF_CONSTRUCTION, VECTOR
from totalrecall_indexer.adapters.zvec_tiers import ZvecTiers
from totalrecall_indexer.core.search import TIERS


def _ef_construction(path: Path) -> int:
    col = zvec.open(str(path))
    try:
        (vector,) = [v for v in col.schema.vectors if v.name == VECTOR]
        return int(vector.index_param.ef_construction)
    finally:
        col.close()


def test_tiers_are_created_with_their_build_effort(tmp_path: Path) -> None:
    tiers = ZvecTiers(tmp_path, default_dim=8)
    tiers.open()
    tiers.close()
    found = {tier: _ef_construction(tmp_path / tier) for tier in TIERS}
    assert found == {tier: EF_CONSTRUCTION[tier] for tier in TIERS}
    # The hot tier, rebuilt under ingest, builds with less effort than the quantized ones.
    assert found["hot"] < found["warm"] == found["cold"]
