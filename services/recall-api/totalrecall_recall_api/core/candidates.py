"""The candidates of a hybrid recall, from what its searches found (pure).

A vector hit is a candidate with its similarity (the best one, when tiers overlap); a keyword
hit one with its rank, once its row is at hand (a row is what says it belongs to the namespace
and the hosts asked about); a diagnostic question's recent troubles are candidates with neither,
standing on their recency and on being the machine's events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from totalrecall_schema import VectorHit, memory_key

from .fusion import Candidate
from .hosts import host_allowed

if TYPE_CHECKING:
    from ..ports import Row


def collect(vec_hits: Sequence[VectorHit], bm25_hits: Sequence[tuple[str, float]],
            by_key: dict[str, Row], recent: Sequence[Row], allowed: frozenset[str] | None,
            until: datetime | None) -> dict[str, Candidate]:
    """Candidates by key. `by_key`: the rows at hand (the recent rows are added to it);
    `until`: nothing after the asking day from the keyword and recent rows."""
    cands: dict[str, Candidate] = {}
    for h in vec_hits:
        c = cands.get(h.key)
        if c is None or (c.vector_sim or 0) < h.score:
            cands[h.key] = Candidate(h.key, datetime.fromtimestamp(h.timestamp_ms / 1000, UTC),
                                     h.summary, vector_sim=h.score, tier=h.tier,
                                     category=h.category)
    for key, rank in bm25_hits:
        c = cands.get(key)
        if c is None:
            m = by_key.get(key)
            if m is None:
                continue
            c = cands[key] = Candidate(key, m.timestamp, m.summary, tier=m.tier)
        c.bm25 = rank
    for m in recent:  # diagnostic: what just went wrong on the machine, even if worded apart
        if not host_allowed(m.metadata, allowed):
            continue
        key = memory_key(m.namespace, m.id)
        by_key.setdefault(key, m)
        cands.setdefault(key, Candidate(key, m.timestamp, m.summary, tier=m.tier))
    if until is not None:
        cands = {k: c for k, c in cands.items() if c.timestamp <= until}
    describe(cands, by_key)
    return cands


def text_of(m: Row) -> str:
    """What recall compares a memory by once its row is read (MMR, templates): summary and
    detail."""
    return f"{m.summary} {m.detail}"


def describe(cands: Mapping[str, Candidate], by_key: Mapping[str, Row]) -> None:
    """Text and category of the candidates whose rows are at hand (MMR compares texts)."""
    for key, c in cands.items():
        m = by_key.get(key)
        if m is not None:
            c.text = text_of(m)
            c.category = m.category
