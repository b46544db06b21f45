"""Neighbour expansion: the memories just before and after a strong hit share in its score.

A memory rarely stands alone: in a conversation the answer is often the turn after the question
that matched ("What did you do?" → "I went to the LGBTQ support group"), and on a machine the
event that explains an error is the one just before it from the same service. So, after fusion,
each of the best hits lends `weight` × its score to its neighbours (adjacent in time, same
namespace, same thread: the same session, or for events without one the same source and service;
the store decides which rows those are). The largest share a memory is lent counts, so one next
to a strong hit can enter the answer even if its own words never matched.

How the share meets a memory's own score depends on what the memory is. A conversation turn
keeps its own score plus the share: a reply completes the turn before it, together they are one
piece of evidence. A machine event keeps the larger of the two: each event stands on its own,
and the line beside a hit is its context, which enters the answer but does not lift an event
above the ones that match by themselves (in an sshd session "Invalid user X",
"input_userauth_request: invalid user X" and "Failed password for invalid user X … port N" lent
to each other until embedding noise decided which came first). The figures for both choices are
in docs/eval.md (2026-11-26, night).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from .fusion import Candidate, by_score


class NeighbourRow(Protocol):
    """What expansion needs of a stored memory (a `Memory` fits)."""

    @property
    def timestamp(self) -> datetime: ...
    @property
    def summary(self) -> str: ...
    @property
    def actor(self) -> str: ...


def _distances(hit: Candidate, rows: Sequence[tuple[str, NeighbourRow]]) -> dict[str, int]:
    """Steps from the hit to each neighbour, counted outwards on either side in (timestamp, key)
    order, the order the store walks: 1, 2, … after the hit, -1, -2, … before it."""
    here = (hit.timestamp, hit.key)
    before: list[tuple[datetime, str]] = []
    after: list[tuple[datetime, str]] = []
    for k, r in rows:  # one pass, each position built once
        at = (r.timestamp, k)
        if at < here:
            before.append(at)
        elif at > here:
            after.append(at)
    before.sort(reverse=True)
    after.sort()
    steps = {k: -i for i, (_, k) in enumerate(before, start=1)}
    steps.update((k, i) for i, (_, k) in enumerate(after, start=1))
    return steps


#: The metadata that puts a memory in a conversation (the indexer's `thread` column, its
#: migration 4, reads the same keys).
SESSION_KEYS = ("session", "session_id", "conversation_id")


def in_session(metadata: Mapping[str, object]) -> bool:
    """Whether a memory with this metadata is a turn of a conversation."""
    return any(metadata.get(k) is not None for k in SESSION_KEYS)


def asks(text: str) -> bool:
    """Whether a memory asks something: its answer is then the memory after it."""
    return "?" in text


def expand(ranked: Sequence[Candidate], neighbours: Mapping[str, Sequence[tuple[str, NeighbourRow]]],
           weight: float, decay: float = 1.0, answer_weight: float = 0.0,
           answerers: Collection[str] = (),
           in_conversation: Callable[[str], bool] = lambda key: True) -> list[Candidate]:
    """`ranked` (best first) with neighbour shares added; returns the candidates re-sorted.

    `neighbours` maps a hit's key to its neighbours as (key, row); neighbours that were not
    candidates become candidates with no score of their own. A neighbour d steps away gets
    `weight · decay^(d-1)` of the hit's score. The memory right after a hit that asks something,
    when one of `answerers` (the actors the query is about) said it, is the answer the query is
    after ("what is Caroline excited about" → "…anything you're excited about?" → Caroline's
    reply): it gets `answer_weight` of the hit's score when that is more. Only the share of the
    strongest neighbouring hit counts (not the sum), so a run of weak matches cannot outrank a
    strong one. `in_conversation(key)`: whether that memory is a conversation turn (its own
    score and the share add up) or a machine event (the larger counts).
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
        lends = weight * hit.score
        asking = answer_weight > weight and asks(hit.text)  # once per hit, not per neighbour
        for key, row in rows:
            d = steps.get(key)
            if d is None or key == hit_key:
                continue
            if key not in by_key:
                by_key[key] = Candidate(key, row.timestamp, row.summary)
            share = lends * decay ** (abs(d) - 1)
            if d == 1 and asking and row.actor.lower() in answerers:
                share = answer_weight * hit.score
            lent[key] = max(lent.get(key, 0.0), share)
    for key, share in lent.items():
        c = by_key[key]
        c.components["neighbour"] = share
        c.score = c.score + share if in_conversation(key) else max(c.score, share)
    return sorted(by_key.values(), key=by_score, reverse=True)

