"""Neighbour expansion: the memories just before and after a strong hit share in its score.

A memory rarely stands alone: in a conversation the answer is often the turn after the question
that matched ("What did you do?" → "I went to the LGBTQ support group"), and on a machine the
event that explains an error is the one just before it from the same service. So, after fusion,
each of the best hits lends `weight` × its score to its neighbours (adjacent in time, same
namespace, same thread: the same session, or for events without one the same source and service;
the store decides which rows those are). A memory keeps its own score plus the largest share it
is lent, so one next to a strong hit can enter the answer even if its own words never matched.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from .fusion import Candidate


class NeighbourRow(Protocol):
    """What expansion needs of a stored memory (a `Memory` fits)."""

    timestamp: datetime
    summary: str
    actor: str


def _distances(hit: Candidate, rows: Sequence[tuple[str, NeighbourRow]]) -> dict[str, int]:
    """Steps from the hit to each neighbour, counted outwards on either side in (timestamp, key)
    order, the order the store walks: 1, 2, … after the hit, -1, -2, … before it."""
    here = (hit.timestamp, hit.key)
    before = sorted(((r.timestamp, k) for k, r in rows if (r.timestamp, k) < here), reverse=True)
    after = sorted((r.timestamp, k) for k, r in rows if (r.timestamp, k) > here)
    return {**{k: -i for i, (_, k) in enumerate(before, start=1)},
            **{k: i for i, (_, k) in enumerate(after, start=1)}}


def asks(text: str) -> bool:
    """Whether a memory asks something: its answer is then the memory after it."""
    return "?" in text


def expand(ranked: Sequence[Candidate], neighbours: Mapping[str, Sequence[tuple[str, NeighbourRow]]],
           weight: float, decay: float = 1.0, answer_weight: float = 0.0,
           answerers: Collection[str] = ()) -> list[Candidate]:
    """`ranked` (best first) with neighbour shares added; returns the candidates re-sorted.

    `neighbours` maps a hit's key to its neighbours as (key, row); neighbours that were not
    candidates become candidates with no score of their own. A neighbour d steps away gets
    `weight · decay^(d-1)` of the hit's score. The memory right after a hit that asks something,
    when one of `answerers` (the actors the query is about) said it, is the answer the query is
    after ("what is Caroline excited about" → "…anything you're excited about?" → Caroline's
    reply): it gets `answer_weight` of the hit's score when that is more. Only the share of the
    strongest neighbouring hit counts (not the sum), so a run of weak matches cannot outrank a
    strong one.
    """
    if weight <= 0 or not neighbours:
        return list(ranked)
    by_key = {c.key: c for c in ranked}
    lent: dict[str, float] = {}
    for hit_key, rows in neighbours.items():
        hit = by_key.get(hit_key)
        if hit is None or hit.score <= 0:
            continue
        steps = _distances(hit, rows)
        for key, row in rows:
            if key == hit_key or key not in steps:
                continue
            if key not in by_key:
                by_key[key] = Candidate(key, row.timestamp, row.summary)
            d = steps[key]
            share = weight * hit.score * decay ** (abs(d) - 1)
            if (d == 1 and answer_weight > weight and row.actor.lower() in answerers
                    and asks(hit.text)):
                share = answer_weight * hit.score
            lent[key] = max(lent.get(key, 0.0), share)
    for key, share in lent.items():
        c = by_key[key]
        c.components["neighbour"] = share
        c.score += share
    return sorted(by_key.values(), key=lambda c: c.score, reverse=True)

