"""The consistency check's comparison of Zvec with Postgres (core/reconcile.plan): what is
missing, what is held twice, what Postgres does not know, and where the tier column is wrong."""

from __future__ import annotations

from totalrecall_indexer.core.reconcile import plan


def pg(**tiers: str) -> dict[str, tuple[str, bool]]:
    """Postgres's key -> (tier, embedded with the index's model) for memories with a vector."""
    return {key: (tier, True) for key, tier in tiers.items()}


def test_agreeing_stores_need_nothing() -> None:
    rep = plan({"hot": ["a", "b"], "warm": ["c"]}, pg(a="hot", b="hot", c="warm"))
    assert rep.missing == {} and rep.remove == {} and rep.retier == {}


def test_missing_memories_are_listed_under_the_tier_postgres_names() -> None:
    rep = plan({"hot": ["a"]}, pg(a="hot", b="hot", c="cold"))
    assert rep.missing == {"hot": ["b"], "cold": ["c"]}
    assert rep.remove == {}


def test_memories_without_a_vector_of_the_index_are_neither_missing_nor_strays() -> None:
    # Stored unembedded (the embedder was down, or another model's vector): Zvec need not
    # hold them; one it holds all the same (from before the model was recorded) stays.
    rep = plan({"hot": ["old"]}, {"old": ("hot", False), "new": ("hot", False)})
    assert rep.missing == {} and rep.remove == {} and rep.retier == {}


def test_a_memory_in_two_tiers_keeps_the_copy_postgres_names() -> None:
    rep = plan({"hot": ["a"], "warm": ["a"]}, pg(a="hot"))
    assert rep.remove == {"warm": {"a": "duplicate"}}
    assert rep.retier == {} and rep.missing == {}


def test_a_memory_in_two_tiers_postgres_does_not_name_keeps_the_colder_copy() -> None:
    # Compaction writes the colder tier first; a kill before Postgres learnt the new tier.
    rep = plan({"hot": ["a"], "warm": ["a"], "cold": []}, pg(a="cold"))
    assert rep.remove == {"hot": {"a": "duplicate"}}
    assert rep.retier == {"warm": ["a"]}


def test_a_single_copy_in_another_tier_corrects_postgres_not_zvec() -> None:
    rep = plan({"warm": ["a"]}, pg(a="hot"))
    assert rep.remove == {} and rep.missing == {}
    assert rep.retier == {"warm": ["a"]}


def test_keys_postgres_does_not_hold_are_strays_in_every_tier() -> None:
    rep = plan({"hot": ["x"], "cold": ["x", "b"]}, pg(b="cold"))
    assert rep.remove == {"hot": {"x": "stray"}, "cold": {"x": "stray"}}
