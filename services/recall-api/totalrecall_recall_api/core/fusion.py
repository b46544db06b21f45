"""Hybrid scoring: normalised vector + BM25 + recency, then MMR for diversity."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter

from .text import jaccard, shingles, words


@dataclass
class Candidate:
    key: str
    timestamp: datetime
    text: str
    vector_sim: float | None = None  # cosine similarity from the vector index
    bm25: float | None = None  # raw rank from Postgres
    tier: str = "text"
    category: str = ""
    score: float = 0.0
    components: dict[str, float] = field(default_factory=dict)


#: The sort key of a ranking, best first with `reverse=True` (a getter in C: a recall re-sorts its
#: hundred and more candidates about ten times).
by_score = attrgetter("score")


def lift_by_best(cands: list[Candidate], times: Callable[[Candidate], int],
                 component: str) -> list[Candidate]:
    """`cands` with each lifted by the best score times `times(c)` (0: not lifted; recorded
    as `component`), sorted: a rank-lexicographic rule that puts what a question singles out
    first, in the order fusion gave, with no weight to tune."""
    top = max(max(c.score for c in cands), 1e-6)
    for c in cands:
        n = times(c)
        if n:
            c.components[component] = round(n * top, 6)
            c.score += n * top
    cands.sort(key=by_score, reverse=True)
    return cands


@dataclass(frozen=True)
class Weights:
    vector: float = 0.55
    bm25: float = 0.30
    recency: float = 0.15
    half_life_hours: float = 168.0
    #: How vector similarity is put on a 0–1 scale: "raw" (cosine as is) or "minmax" (over this
    #: query's vector candidates).
    vector_norm: str = "raw"
    #: BM25 is divided by the best BM25 of the query, but by no less than this: a store that
    #: scores in units of the query's ideal match (PostgresStore) thus keeps a weak best match
    #: (one common word of five) weak instead of scaling it to 1.
    bm25_floor: float = 0.0
    #: Cosine similarity below which a candidate has no vector evidence (min-max scaling).
    vector_floor: float = 0.0


def _scaler(values: Sequence[float], how: str, floor: float = 0.0) -> tuple[float, float]:
    """(offset, scale) so that (v - offset) / scale maps this query's values onto 0–1. With
    min-max, similarities under `floor` map to 0 and the range starts at the floor: a query
    whose best match is unrelated gets no vector evidence at all, rather than a 1."""
    if how == "minmax" and values:
        lo, hi = max(min(values), floor), max(values)
        if hi > lo:
            return lo, hi - lo
        if hi <= floor:
            return floor, float("inf")  # nothing related: every component is 0
    return 0.0, 1.0


def recency(ts: datetime, now: datetime, half_life_hours: float) -> float:
    age_h = max(0.0, (now - ts).total_seconds() / 3600.0)
    return math.pow(0.5, age_h / half_life_hours) if half_life_hours > 0 else 0.0


def fuse(cands: Sequence[Candidate], now: datetime, w: Weights) -> list[Candidate]:
    """Score every candidate; returns them sorted best first.

    Vector similarity is used as is (cosine is already on an absolute scale), clipped at 0;
    BM25 is divided by the best BM25 of this query (ranks are only comparable within a query).
    A component a candidate lacks counts as 0.
    """
    best_bm25 = max(max((c.bm25 for c in cands if c.bm25), default=0.0), w.bm25_floor)
    v_off, v_scale = _scaler([c.vector_sim for c in cands if c.vector_sim is not None],
                             w.vector_norm, w.vector_floor)
    for c in cands:
        v = max(0.0, (c.vector_sim - v_off) / v_scale) if c.vector_sim is not None else 0.0
        b = (c.bm25 / best_bm25) if (c.bm25 and best_bm25 > 0) else 0.0
        r = recency(c.timestamp, now, w.half_life_hours)
        c.components = {"vector": v, "bm25": b, "recency": r}
        c.score = w.vector * v + w.bm25 * b + w.recency * r
    return sorted(cands, key=by_score, reverse=True)


def evidence(c: Candidate, w: Weights) -> float:
    """How much of a candidate's score says it is about the query: similarity, keywords, a date
    the query names, the diagnostic lift. Recency and who said it are priors, not evidence."""
    comp = c.components
    return (w.vector * comp.get("vector", 0.0) + w.bm25 * comp.get("bm25", 0.0)
            + comp.get("date", 0.0) + comp.get("diagnostic", 0.0))


#: Actors too generic for a query's mention of them to single out memories.
GENERIC_ACTORS = frozenset({"user", "assistant", "system", "agent", "api", "me", "i"})


#: Words by which the one asking speaks of themself.
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
#: Words by which the one asking speaks of the agent ("what did you suggest…").
SECOND_PERSON = frozenset({"you", "your", "yours", "yourself", "you're", "you've", "you'd"})


def actor_boosts(query: str, boost: float, asker: str = "",
                 asker_boost: float = 0.0) -> dict[str, float]:
    """The actors a query is about and what their memories get: the ones it names ("what did
    Caroline say…") `boost`, since the actor is a field, not always in the text keyword search
    sees. A question in the first person ("how often do I…") and not about what the agent said
    ("…did you suggest") is about the user's own words: `asker` gets `asker_boost`."""
    said = set(words(query))
    # "Caroline's" names Caroline
    named = {w.removesuffix("'s") for w in said} - GENERIC_ACTORS
    boosts = dict.fromkeys(named, boost) if boost > 0 else {}
    if asker and asker_boost > 0 and said & FIRST_PERSON and not said & SECOND_PERSON:
        boosts[asker.lower()] = max(asker_boost, boosts.get(asker.lower(), 0.0))
    return boosts


def boost_actors(cands: Sequence[Candidate], actor_of: Mapping[str, str],
                 boosts: Mapping[str, float]) -> None:
    """Adds each candidate's actor's boost (`actor_boosts`) to its score."""
    if not boosts:
        return
    for c in cands:
        b = boosts.get(actor_of.get(c.key, "").lower())
        if b:
            c.components["actor"] = b
            c.score += b


#: Characters of a memory's text compared for near-duplicates: the opening of a long memory (a
#: chat answer, a log excerpt) tells a repeat as well as all of it, at a fraction of the cost.
MMR_TEXT_CHARS = 1500


def mmr(ranked: Sequence[Candidate], k: int, lam: float) -> list[Candidate]:
    """Maximal marginal relevance over text overlap: drops near-duplicates, keeps relevance.

    Each candidate's similarity to the chosen ones is kept up to date as they are chosen, so
    every pair is compared once."""
    if k <= 0 or not ranked:
        return []
    pool = list(ranked[: max(k * 4, 20)])
    sets = {c.key: shingles(c.text[:MMR_TEXT_CHARS]) for c in pool}
    top = pool[0].score or 1.0
    sim = {c.key: 0.0 for c in pool}  # max similarity to any chosen candidate
    chosen: list[Candidate] = []
    while pool and len(chosen) < k:
        best = max(pool, key=lambda c: lam * (c.score / top) - (1 - lam) * sim[c.key])
        pool.remove(best)
        chosen.append(best)
        if len(chosen) == k:  # the last pick: no similarity is asked for again
            break
        new = sets[best.key]
        for c in pool:
            sim[c.key] = max(sim[c.key], jaccard(sets[c.key], new))
    return chosen
