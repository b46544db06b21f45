"""A memory derived from a turn (what it concluded, `core/conclusions.py`) ranks just before
that turn when the turn ranks above it; a turn its conclusion restates whole is shown once
(pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from totalrecall_schema import Memory, memory_key

from .conclusions import Said, derived_first, turn_text
from .fusion import Candidate

if TYPE_CHECKING:
    from ..ports import Row


def derived_before_turns(ranked: list[Candidate], by_key: Mapping[str, Row]) -> list[Candidate]:
    """The conclusion answers, the turn is its context. A moved memory takes the turn's score
    (and a hair more), so later sorts keep the order."""
    turns = {c.key: t for c in ranked if (t := source_key(by_key.get(c.key))) is not None}
    if not turns:
        return ranked
    order = derived_first([c.key for c in ranked], turns)
    if order == [c.key for c in ranked]:
        return ranked
    by_cand = {c.key: c for c in ranked}
    out = [by_cand[k] for k in order]
    floor: dict[str, float] = {}  # a turn → the score its conclusions before it need
    for c in reversed(out):  # the conclusions moved stand right before their turn
        turn = turns.get(c.key)
        if turn is not None and turn in floor and c.score <= floor[turn]:
            lift = floor[turn] - c.score + 1e-6
            c.components["derived"] = round(lift, 6)
            c.score += lift
        if turn is not None and turn in floor:
            floor[turn] = c.score
        floor.setdefault(c.key, c.score)
    return out


_END = re.compile(r"[\s.!?…]+$")


def _said(text: str) -> str:
    return _END.sub("", " ".join(text.split()).casefold())


def restates(derived: Said, turn: Said) -> bool:
    """The derived memory says all its turn said: a turn of one sentence ("The root cause was an
    expired SSH key.") concluded whole, as a diagnosis or a preference."""
    return _said(derived.summary) == _said(turn_text(turn))


def source_key(m: Row | Memory | None) -> str | None:
    """The key of the turn the memory `m` was derived from (None: not derived, or unknown)."""
    source = m.metadata.get("derived_from") if m is not None else None
    return memory_key(m.namespace, source) if m is not None and isinstance(source, str) \
        and source else None


def without_restated_turns(ranked: Sequence[Candidate], by_key: Mapping[str, Row]
                           ) -> list[Candidate]:
    """`ranked` without the turns a conclusion among them restates whole: the same sentence
    twice tells the model nothing more and takes a place another memory could have. The
    conclusion stays (its kind, a diagnosis or a preference, is what a question about
    conclusions asks for), at the better place and score of the two."""
    present = {c.key: c for c in ranked}
    shown_for: dict[str, Candidate] = {}  # a restated turn's key → the conclusion shown instead
    for c in ranked:
        turn = source_key(by_key.get(c.key))
        if turn in present and turn in by_key and turn not in shown_for \
                and restates(by_key[c.key], by_key[turn]):
            shown_for[turn] = c
    if not shown_for:
        return list(ranked)
    for turn, c in shown_for.items():
        if present[turn].score > c.score:
            c.components["turn"] = round(present[turn].score - c.score, 6)
            c.score = present[turn].score
    out: list[Candidate] = []
    placed: set[str] = set()
    for c in ranked:  # each conclusion at the first place of the two
        keep = shown_for.get(c.key, c)
        if keep.key not in placed:
            placed.add(keep.key)
            out.append(keep)
    return out


def shown_as_turn(pattern: Memory, shown: Mapping[str, Memory]) -> bool:
    """A pattern of the profile (a stated preference) whose turn is among the memories shown
    and says the same: the profile need not say it again."""
    turn = shown.get(source_key(pattern) or "")
    return turn is not None and restates(pattern, turn)
