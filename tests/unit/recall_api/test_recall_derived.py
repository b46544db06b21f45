"""core/derived.py: a turn that its conclusion says again whole is shown once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from totalrecall_recall_api.core.derived import (
    restates,
    shown_as_turn,
    without_restated_turns,
)
from totalrecall_recall_api.core.fusion import Candidate
from totalrecall_schema import Memory, memory_key

NOW = datetime.now(UTC)
NS = "agent-1"


def _memory(i: str, summary: str, detail: str = "", **md: Any) -> Memory:
    return Memory(id=i, namespace=NS, score=0, timestamp=NOW - timedelta(minutes=5),
                  category="diagnosis" if md.get("derived_from") else "conversation",
                  summary=summary, detail=detail, metadata=dict(md))


def _ranked(*pairs: tuple[Memory, float]) -> tuple[list[Candidate], dict[str, Any]]:
    by_key = {memory_key(NS, m.id): m for m, _ in pairs}
    return [Candidate(memory_key(NS, m.id), m.timestamp, m.summary, score=s)
            for m, s in pairs], by_key


def test_a_conclusion_restates_a_turn_of_one_sentence_only() -> None:
    cause = _memory("c1", "The root cause was an expired SSH key.", derived_from="t1")
    assert restates(cause, _memory("t1", "assistant: The root cause was an expired  SSH key"))
    assert restates(cause, _memory("t1", "the root cause was an expired ssh key!"))
    assert not restates(cause, _memory(
        "t1", "The root cause was an expired SSH key. I rotated it and reran the job."))
    # a long turn whose summary is cut: its detail holds the rest
    assert not restates(cause, _memory("t1", "The root cause was an expired SSH key…",
                                       detail="The root cause was an expired SSH key. And more."))


def test_the_restated_turn_gives_its_place_and_score_to_the_conclusion() -> None:
    turn = _memory("t1", "The root cause was an expired SSH key.")
    cause = _memory("c1", "The root cause was an expired SSH key.", derived_from="t1")
    other = _memory("o1", "The backup job failed again last night.")
    ranked, by_key = _ranked((turn, 0.9), (other, 0.8), (cause, 0.5))
    out = without_restated_turns(ranked, by_key)
    assert [c.key for c in out] == [memory_key(NS, "c1"), memory_key(NS, "o1")]
    assert out[0].score == 0.9 and out[0].components["turn"] == 0.4
    # already first: nothing to lend
    ranked, by_key = _ranked((cause, 0.9), (other, 0.8), (turn, 0.5))
    out = without_restated_turns(ranked, by_key)
    assert [(c.key, c.score) for c in out] == [(memory_key(NS, "c1"), 0.9),
                                              (memory_key(NS, "o1"), 0.8)]


def test_a_turn_that_says_more_than_its_conclusion_stays() -> None:
    turn = _memory("t1", "The cause was an expired SSH key. I rotated it and reran the job.")
    cause = _memory("c1", "The cause was an expired SSH key.", derived_from="t1")
    ranked, by_key = _ranked((cause, 0.9), (turn, 0.8))
    assert [c.key for c in without_restated_turns(ranked, by_key)] == [
        memory_key(NS, "c1"), memory_key(NS, "t1")]
    # nothing derived, or the turn not among the candidates: unchanged
    ranked, by_key = _ranked((turn, 0.9))
    assert without_restated_turns(ranked, by_key) == ranked
    alone = _memory("c2", "Never change the wifi settings without asking me.", derived_from="t9")
    ranked, by_key = _ranked((alone, 0.9), (turn, 0.8))
    assert without_restated_turns(ranked, by_key) == ranked


def test_the_profile_does_not_repeat_a_turn_shown_whole() -> None:
    turn = _memory("t1", "user: Never change the wifi settings without asking me first.")
    rule = _memory("p1", "Never change the wifi settings without asking me first.",
                   derived_from="t1")
    assert shown_as_turn(rule, {memory_key(NS, "t1"): turn})
    assert not shown_as_turn(rule, {})
    longer = _memory("t1", "Never change the wifi settings without asking me first. Thanks!")
    assert not shown_as_turn(rule, {memory_key(NS, "t1"): longer})
    assert not shown_as_turn(_memory("p2", "I prefer podman."), {memory_key(NS, "t1"): turn})
