"""The expand stage of a hybrid recall (pure): which hits' neighbours are looked up, and the
neighbours found lending to the ranking (`neighbours.expand`), before MMR, so that a neighbour
that repeats its hit is still dropped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .candidates import describe
from .fusion import Candidate
from .hosts import same_context
from .neighbours import expand, in_session

if TYPE_CHECKING:
    from ..ports import Row
    from ..settings import Settings


def expansion_keys(ranked: Sequence[Candidate], s: Settings) -> list[str]:
    """The hits whose neighbours are looked up (none when expansion is off)."""
    if s.neighbour_weight <= 0 or s.neighbour_window <= 0 or s.neighbour_hits <= 0:
        return []
    return [c.key for c in ranked[: s.neighbour_hits]]


def with_neighbours(ranked: list[Candidate], by_key: dict[str, Row],
                    found: Sequence[tuple[str, Sequence[tuple[str, Row | None]]]],
                    answerers: frozenset[str], s: Settings) -> list[Candidate]:
    """`ranked` with the neighbours `found` of its hits. `answerers`: the actors the query
    names, whose answers to a matching question count. The neighbours kept join `by_key`."""
    if not found:
        return ranked
    nbrs: dict[str, list[tuple[str, Row]]] = {}
    for hit, rows in found:
        if hit not in by_key:
            continue
        # Same namespace only, like every other row (defence in depth), and the hit's own
        # host for a machine's events (`core/hosts.py`). A row the store left out (None) is
        # one we hold already.
        have = [(k, m if m is not None else by_key.get(k)) for k, m in rows]
        this = by_key[hit]
        keep = [(k, m) for k, m in have
                if m is not None and m.namespace == this.namespace
                and same_context(this.metadata, m.metadata)]
        for k, m in keep:
            by_key.setdefault(k, m)
        nbrs[hit] = keep
    out = expand(ranked, nbrs, s.neighbour_weight, s.neighbour_decay, s.neighbour_answer_weight,
                 answerers, lambda key: key in by_key and in_session(by_key[key].metadata))
    # the neighbours that were no candidates
    describe({c.key: c for c in out if not c.category}, by_key)
    return out
