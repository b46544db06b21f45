"""The fuse stage of a hybrid recall (pure): candidates scored by vector, keywords and recency,
boosted by the dates and actors the question names and, for a diagnostic question, by being the
machine's events; what has no evidence of being about the question is dropped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from .fusion import Candidate, Weights, actor_boosts, boost_actors, by_score, evidence, fuse
from .temporal import DateMatch, boost_dated

if TYPE_CHECKING:
    from ..ports import Row
    from ..settings import Settings


def weights(s: Settings) -> Weights:
    return Weights(s.weight_vector, s.weight_bm25, s.weight_recency, s.half_life_hours,
                   s.vector_norm, s.bm25_min_coverage, s.vector_floor)


def rank(cands: Sequence[Candidate], by_key: Mapping[str, Row], now: datetime, query: str,
         dates: Sequence[DateMatch], s: Settings, *, diagnostic: bool,
         system_categories: Sequence[str]) -> tuple[list[Candidate], dict[str, float]]:
    """(the candidates best first, the actor boosts the question names)."""
    w = weights(s)
    ranked = fuse(list(cands), now, w)
    boost_dated(ranked, dates, s.date_boost)
    # "Why did my build fail" is about the machine's events, not the user's words.
    actors = actor_boosts(query, s.actor_boost, s.asker_actor,
                          0.0 if diagnostic else s.asker_boost)
    boost_actors(ranked, {k: m.actor for k, m in by_key.items()}, actors)
    if diagnostic:  # the design: diagnostic questions are about the machine's recent events
        for c in ranked:
            if c.category in system_categories:
                c.components["diagnostic"] = s.diagnostic_boost
                c.score += s.diagnostic_boost
    # Nothing about the query, only recent or said by the right person: not recalled (nor
    # lending to its neighbours). An unrelated question recalls nothing, not the latest.
    ranked = [c for c in ranked if evidence(c, w) >= s.min_evidence]
    ranked.sort(key=by_score, reverse=True)
    return ranked, actors
