"""A memory derived from a turn (what it concluded, `core/conclusions.py`) ranks just before
that turn when the turn ranks above it (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from totalrecall_schema import memory_key

from .conclusions import derived_first
from .fusion import Candidate

if TYPE_CHECKING:
    from ..ports import Row


def derived_before_turns(ranked: list[Candidate], by_key: Mapping[str, Row]) -> list[Candidate]:
    """The conclusion answers, the turn is its context. A moved memory takes the turn's score
    (and a hair more), so later sorts keep the order."""
    turn_of: dict[str, str] = {}
    for c in ranked:
        m = by_key.get(c.key)
        if m is None:
            continue
        turn = m.metadata.get("derived_from")
        if isinstance(turn, str) and turn:
            turn_of[c.key] = memory_key(m.namespace, turn)
    if not turn_of:
        return ranked
    order = derived_first([c.key for c in ranked], turn_of)
    if order == [c.key for c in ranked]:
        return ranked
    by_cand = {c.key: c for c in ranked}
    out = [by_cand[k] for k in order]
    floor: dict[str, float] = {}  # a turn → the score its conclusions before it need
    for c in reversed(out):  # the conclusions moved stand right before their turn
        turn = turn_of.get(c.key)
        if turn is not None and turn in floor and c.score <= floor[turn]:
            lift = floor[turn] - c.score + 1e-6
            c.components["derived"] = round(lift, 6)
            c.score += lift
        if turn is not None and turn in floor:
            floor[turn] = c.score
        floor.setdefault(c.key, c.score)
    return out
