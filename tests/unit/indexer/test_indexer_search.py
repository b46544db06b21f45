"""Pure search helpers: zvec filter strings, tier assignment, fusion of tier hits."""

from __future__ import annotations

import pytest
from totalrecall_indexer.core.search import (
    build_filter,
    distance_to_similarity,
    fuse_tier_hits,
    tier_for_age,
)
from totalrecall_schema import VectorFilter, VectorHit

H = 3600 * 1000
D = 24 * H


def test_filter_namespace_only() -> None:
    assert build_filter(VectorFilter()) == "namespace = 'default'"


def test_filter_everything() -> None:
    f = VectorFilter(namespace="agent-1", since_ms=100, until_ms=200,
                     categories=["error", "system.service", "error"],
                     severities=["error", "critical"])
    assert build_filter(f) == (
        "namespace = 'agent-1' and ts >= 100 and ts <= 200 and "
        "category IN ('error', 'system.service') and severity IN ('error', 'critical')")
    assert "==" not in build_filter(f)


@pytest.mark.parametrize("bad", ["x' or '1'='1", 'a"b', "back\\slash", ""])
def test_filter_rejects_unsafe_values(bad: str) -> None:
    with pytest.raises(ValueError):
        build_filter(VectorFilter(namespace=bad))
    with pytest.raises(ValueError):
        build_filter(VectorFilter(categories=[bad]))


def test_filter_empty_list_is_an_error() -> None:
    with pytest.raises(ValueError):
        build_filter(VectorFilter(categories=[]))


@pytest.mark.parametrize(("age_ms", "tier"), [
    (0, "hot"), (23 * H, "hot"), (D - 1, "hot"), (D, "warm"), (89 * D, "warm"),
    (90 * D, "cold"), (400 * D, "cold"), (-5 * H, "hot")])
def test_tier_for_age(age_ms: int, tier: str) -> None:
    now = 1_800_000_000_000
    assert tier_for_age(now - age_ms, now) == tier


def test_tier_for_age_custom_limits() -> None:
    assert tier_for_age(0, 10_000, hot_max_age_s=5, warm_max_age_s=8) == "cold"
    assert tier_for_age(0, 6_000, hot_max_age_s=5, warm_max_age_s=8) == "warm"


def _hit(key: str, score: float, tier: str, ts: int = 0) -> VectorHit:
    return VectorHit(key=key, id=key, score=score, tier=tier, timestamp_ms=ts,  # type: ignore[arg-type]
                     category="error", summary=key)


def test_fuse_dedups_by_key_and_sorts() -> None:
    fused = fuse_tier_hits({
        "warm": [_hit("a", 0.90, "warm"), _hit("c", 0.5, "warm")],
        "hot": [_hit("a", 0.90, "hot"), _hit("b", 0.95, "hot")],
        "cold": [_hit("d", 0.7, "cold"), _hit("c", 0.6, "cold")],
    }, topk=10)
    assert [(h.key, h.tier) for h in fused] == [("b", "hot"), ("a", "hot"), ("d", "cold"),
                                                ("c", "cold")]


def test_fuse_topk_and_tie_break_by_recency() -> None:
    fused = fuse_tier_hits({"hot": [_hit("old", 0.8, "hot", 1), _hit("new", 0.8, "hot", 2),
                                    _hit("x", 0.1, "hot")]}, topk=2)
    assert [h.key for h in fused] == ["new", "old"]
    assert fuse_tier_hits({}, 5) == []


def test_distance_to_similarity() -> None:
    assert distance_to_similarity(0.0) == 1.0
    assert distance_to_similarity(0.25) == 0.75


def test_optimize_policy_builds_quantized_tiers_promptly() -> None:
    """hot (exact fp32 brute force on its un-indexed part) waits for 2000 new docs or 15 min;
    warm/cold (brute force on quantized codes, poor recall) are built at the next tick."""
    from totalrecall_indexer.core.indexer import Indexer, IndexerConfig

    idx = Indexer(markdown=None, pg=None, tiers=None,  # type: ignore[arg-type]
                  config=IndexerConfig(optimize_min_new_docs=2000, optimize_max_delay_s=900,
                                       linear_max_docs=0))
    assert not idx.optimize_due("hot", 0.99, 5000)
    idx._new_since_optimize["hot"] = 2000
    assert idx.optimize_due("hot", 0.99, 5000)
    assert idx.optimize_due("warm", 0.999, 5000) and idx.optimize_due("cold", 0.5, 10)
    assert not idx.optimize_due("cold", 1.0, 10) and not idx.optimize_due("warm", 0.0, 0)
    idx._last_optimize["hot"] -= 901
    idx._new_since_optimize["hot"] = 1
    assert idx.optimize_due("hot", 0.99, 5000)


def test_tiers_searched_exactly_are_not_built() -> None:
    """A tier of at most `linear_max_docs` is searched by an exact scan: no graph to build, and
    no build during which its searches would go without it."""
    from totalrecall_indexer.core.indexer import Indexer, IndexerConfig

    idx = Indexer(markdown=None, pg=None, tiers=None,  # type: ignore[arg-type]
                  config=IndexerConfig(linear_max_docs=20_000, optimize_min_new_docs=10))
    idx._new_since_optimize["hot"] = 5000
    assert not idx.optimize_due("hot", 0.5, 20_000) and not idx.optimize_due("cold", 0.0, 6000)
    assert idx.optimize_due("hot", 0.5, 20_001) and idx.optimize_due("cold", 0.9, 20_001)


def test_a_copied_tier_past_half_the_copy_is_built_ahead() -> None:
    """A tier searched from its in-memory copy goes on being searched while it is built: past
    half of what the copy covers its graph is built ahead, on the usual cadence, so it leaves
    the copy with the graph ready instead of every doc to build at once."""
    from totalrecall_indexer.core.indexer import Indexer, IndexerConfig

    idx = Indexer(markdown=None, pg=None, tiers=None,  # type: ignore[arg-type]
                  config=IndexerConfig(linear_max_docs=20_000, optimize_min_new_docs=2000))
    assert not idx.optimize_due("hot", 0.0, 12_000, mirrored=True)  # not 2000 new docs yet
    idx._new_since_optimize["hot"] = 2000
    assert idx.optimize_due("hot", 0.0, 12_000, mirrored=True)
    assert not idx.optimize_due("hot", 0.0, 10_000, mirrored=True)  # half: not yet
    assert not idx.optimize_due("hot", 0.0, 12_000, mirrored=False)  # searched by zvec
    # a quantized tier's copy does not make it built ahead: built once it outgrows the copy
    for tier in ("warm", "cold"):
        idx._new_since_optimize[tier] = 5000
        assert not idx.optimize_due(tier, 0.0, 12_000, mirrored=True)
        assert idx.optimize_due(tier, 0.0, 20_001, mirrored=False)


def test_builds_not_done_are_named_running_or_due() -> None:
    """`stats` names the builds a load still calls for: a client that measures, or waits for a
    complete index, waits until none is left."""
    from totalrecall_indexer.core.indexer import Indexer, IndexerConfig

    class Tiers:
        def has_mirror(self, tier: str) -> bool:
            return False

    idx = Indexer(markdown=None, pg=None, tiers=Tiers(),  # type: ignore[arg-type]
                  config=IndexerConfig(linear_max_docs=20_000, optimize_min_new_docs=2000))
    stats = {"hot": {"doc_count": 3375, "index_completeness": 0.0},    # searched exactly
             "warm": {"doc_count": 96_634, "index_completeness": 0.83},  # built at the next tick
             "cold": {"doc_count": 0, "index_completeness": 1.0}}
    assert idx.maintenance.builds(stats) == {"warm": "due"}
    idx.maintenance.building = "warm"
    assert idx.maintenance.builds(stats) == {"warm": "running"}
    idx.maintenance.building = None
    stats["warm"]["index_completeness"] = 1.0
    assert idx.maintenance.builds(stats) == {}
