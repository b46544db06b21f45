"""The MMR stage of a hybrid recall (pure): the `k` memories shown, diverse, each with its score
and the parts it was made of (`_scores`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from totalrecall_schema import Memory

from .derived import derived_before_turns, without_restated_turns
from .fusion import Candidate, mmr

if TYPE_CHECKING:
    from ..ports import Row


def choose(ranked: Sequence[Candidate], by_key: Mapping[str, Row], k: int,
           lam: float, restated_once: bool = True) -> list[Memory]:
    """`restated_once`: a turn said again whole by its conclusion is shown once."""
    if restated_once:
        ranked = without_restated_turns(ranked, by_key)
    # Diversity may have chosen a turn before its conclusion: the conclusion still leads.
    chosen = derived_before_turns(mmr(ranked, k, lam), by_key)
    out: list[Memory] = []
    for c in chosen:
        row = by_key.get(c.key)
        if row is None:
            continue  # indexed in Zvec but not yet visible in Postgres: skip, never guess
        m = row.memory()  # built for the chosen alone
        m.score = round(c.score, 6)
        if c.tier in ("hot", "warm", "cold"):
            m.tier = c.tier  # type: ignore[assignment]
        scores = {name: round(v, 4) for name, v in c.components.items()}
        m.metadata = {**m.metadata, "_scores": scores}
        out.append(m)
    return out
