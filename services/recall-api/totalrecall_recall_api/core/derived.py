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
    turns = {c.key: t for c in ranked if (t := turn_of(c.key, by_key)) is not None}
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


def turn_of(key: str, by_key: Mapping[str, Row]) -> str | None:
    """The key of the turn the memory `key` was derived from (None: not derived)."""
    m = by_key.get(key)
    source = m.metadata.get("derived_from") if m is not None else None
    return memory_key(m.namespace, source) if m is not None and isinstance(source, str) \
        and source else None


def without_restated_turns(ranked: Sequence[Candidate], by_key: Mapping[str, Row]
                           ) -> list[Candidate]:
    """`ranked` without the turns a conclusion among them restates whole: the same sentence
    twice tells the model nothing more and takes a place another memory could have. The
    conclusion stays (its kind, a diagnosis or a preference, is what a question about
    conclusions asks for), at the better place and score of the two."""
    whole: dict[str, str] = {}  # a restated turn → its conclusion
    for c in ranked:
        turn = turn_of(c.key, by_key)
        if turn is not None and turn in by_key and turn not in whole \
                and restates(by_key[c.key], by_key[turn]):
            whole[turn] = c.key
    if not whole:
        return list(ranked)
    present = {c.key: c for c in ranked}
    whole = {t: d for t, d in whole.items() if t in present}
    conclusion_of = {d: present[t] for t, d in whole.items()}
    out: list[Candidate] = []
    placed: set[str] = set()
    for c in ranked:
        d = whole.get(c.key)
        keep = present[d] if d is not None else c
        if keep.key in placed:
            continue
        said = conclusion_of.get(keep.key)  # the turn it stands for
        if said is not None and said.score > keep.score:
            keep.components["turn"] = round(said.score - keep.score, 6)
            keep.score = said.score
        placed.add(keep.key)
        out.append(keep)
    return out


def shown_as_turn(pattern: Memory, shown: Mapping[str, Memory]) -> bool:
    """A pattern of the profile (a stated preference) whose turn is among the memories shown
    and says the same: the profile need not say it again."""
    source = pattern.metadata.get("derived_from")
    turn = shown.get(memory_key(pattern.namespace, source)) if isinstance(source, str) else None
    return turn is not None and restates(pattern, turn)
