"""Ranking additions: neighbour expansion, per-query similarity scaling, dates named in queries,
actors named in queries."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from totalrecall_recall_api.core.fusion import Candidate, Weights, actor_boosts, boost_actors, fuse
from totalrecall_recall_api.core.neighbours import expand, in_session
from totalrecall_recall_api.core.temporal import (
    DateRef,
    DateSpan,
    boost_dated,
    date_refs,
    earliest_day,
)
from totalrecall_schema import Memory

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def _row(summary: str, ts: datetime = NOW, actor: str = "system") -> Memory:
    return Memory(id=summary, score=0, timestamp=ts, category="conversation", summary=summary,
                  namespace="ns", actor=actor)


def test_a_hit_lends_a_share_of_its_score_to_its_neighbours() -> None:
    q = Candidate("q", NOW, "what did you do?", score=0.8)
    other = Candidate("o", NOW, "unrelated", score=0.3)
    ranked = expand([q, other], {"q": [("a", _row("I went to the support group")),
                                       ("q", _row("self: ignored"))]}, 0.5)
    assert [c.key for c in ranked] == ["q", "a", "o"]  # the answer turn joins, above weak hits
    a = ranked[1]
    assert a.score == pytest.approx(0.4) and a.components == {"neighbour": pytest.approx(0.4)}
    assert q.score == 0.8  # the hit itself is not its own neighbour


def test_only_the_strongest_neighbour_counts() -> None:
    a = Candidate("a", NOW, "a", score=0.8)
    b = Candidate("b", NOW, "b", score=0.4)
    mid = Candidate("m", NOW, "m", score=0.1)
    expand([a, b, mid], {"a": [("m", _row("m"))], "b": [("m", _row("m"))]}, 0.5)
    assert mid.score == pytest.approx(0.1 + 0.4)


@pytest.mark.parametrize(("asked", "answerer", "share"), [
    ("Melanie: anything you're excited about in the adoption?", "Caroline", 1.0),
    ("Melanie: anything you're excited about in the adoption?", "Melanie", 0.5),  # not named
    ("Melanie: so excited about the adoption!", "Caroline", 0.5),  # no question
])
def test_the_answer_to_a_matching_question_shares_its_score(asked: str, answerer: str,
                                                            share: float) -> None:
    s = timedelta(seconds=1)
    hit = Candidate("q", NOW, asked, score=0.8)
    rows = [("before", _row("Caroline: hi!", NOW - s, "Caroline")),
            ("reply", _row("I'm thrilled to make a family", NOW + s, answerer)),
            ("later", _row("Caroline: bye", NOW + 2 * s, "Caroline"))]
    ranked = expand([hit], {"q": rows}, 0.5, answer_weight=1.0, answerers={"caroline"})
    got = {c.key: c.components.get("neighbour") for c in ranked}
    assert got["reply"] == pytest.approx(share * 0.8)
    assert got["before"] == got["later"] == pytest.approx(0.4)  # only the reply that follows


def test_a_machine_event_keeps_the_larger_of_its_own_score_and_the_share() -> None:
    """An sshd session: the line the question is about is not outranked by the line beside it,
    which matched less by itself and was lent a share of it; a conversation turn adds both."""
    failed = Candidate("failed", NOW, "Failed password for invalid user matlab port 46199",
                       score=0.9)
    invalid = Candidate("invalid", NOW, "Invalid user matlab from 52.80.34.196", score=0.7)
    rows = {"failed": [("invalid", _row(invalid.text))], "invalid": [("failed", _row(failed.text))]}
    ranked = expand([failed, invalid], rows, 0.5, in_conversation=lambda key: False)
    assert [c.key for c in ranked] == ["failed", "invalid"]
    assert failed.score == pytest.approx(0.9) and invalid.score == pytest.approx(0.7)
    assert invalid.components["neighbour"] == pytest.approx(0.45)  # still said, not counted
    turns = [Candidate("t1", NOW, "a", score=0.9), Candidate("t2", NOW, "b", score=0.7)]
    expand(turns, {"t1": [("t2", _row("b"))], "t2": [("t1", _row("a"))]}, 0.5,
           in_conversation=lambda key: True)
    assert [c.score for c in turns] == [pytest.approx(0.9 + 0.35), pytest.approx(0.7 + 0.45)]


def test_a_neighbour_without_a_score_of_its_own_joins_with_the_share_either_way() -> None:
    hit = Candidate("fail", NOW, "nginx.service failed", score=0.8)
    for in_conversation in (True, False):
        ranked = expand([hit], {"fail": [("cause", _row("port 80 already in use"))]}, 0.5,
                        in_conversation=lambda key, c=in_conversation: c)
        assert [(c.key, round(c.score, 6)) for c in ranked] == [("fail", 0.8), ("cause", 0.4)]


def test_a_memory_is_a_turn_of_a_conversation_by_its_session() -> None:
    assert in_session({"session": "D1"}) and in_session({"conversation_id": "c-7"})
    assert not in_session({"service": "sshd"}) and not in_session({"session": None})


def test_no_weight_or_no_neighbours_changes_nothing() -> None:
    a = Candidate("a", NOW, "a", score=0.8)
    assert expand([a], {"a": [("n", _row("n"))]}, 0.0) == [a]
    assert expand([a], {}, 0.5) == [a]


def test_similarity_can_be_scaled_per_query() -> None:
    a = Candidate("a", NOW, "a", vector_sim=0.6)
    b = Candidate("b", NOW, "b", vector_sim=0.4)
    c = Candidate("c", NOW, "c", vector_sim=0.5, bm25=1.0)
    fuse([a, b, c], NOW, Weights(0.5, 0.5, 0.0, vector_norm="minmax"))
    assert (a.components["vector"], b.components["vector"]) == (1.0, 0.0)
    assert c.components["vector"] == pytest.approx(0.5)
    assert c.score == pytest.approx(0.75)
    fuse([a], NOW, Weights(vector_norm="minmax"))  # one candidate: no range, used as is
    assert a.components["vector"] == pytest.approx(0.6)


@pytest.mark.parametrize(("query", "refs"), [
    ("What did Melanie show Caroline on October 13, 2023?", [DateRef(2023, 10, 13)]),
    ("What happened on 8 May 2023", [DateRef(2023, 5, 8)]),
    ("the 5th of June", [DateRef(None, 6, 5)]),
    ("When did Melanie go camping in July?", [DateRef(None, 7, None)]),
    ("plans for March 2022", [DateRef(2022, 3, None)]),
    ("How many times in 2023?", [DateRef(2023, None, None)]),
    ("what failed yesterday", [DateRef(2026, 1, 4)]),
    ("You may go now", []),  # "may" the verb is no month
    ("march on", []),
    ("disk usage in dec", []),
])
def test_dates_named_in_queries(query: str, refs: list[DateRef]) -> None:
    assert date_refs(query, NOW) == refs


# NOW is Monday 2026-01-05.
@pytest.mark.parametrize(("query", "refs"), [
    ("I received a piece of jewelry last Saturday from whom?", [DateRef(2026, 1, 3)]),
    ("what did I install on Monday", [DateRef(2025, 12, 29)]),  # the last one before today
    ("the day before yesterday", [DateRef(2026, 1, 3)]),
    ("which shoes did I clean last month?", [DateRef(2025, 12, None)]),
    ("what did I fix this month", [DateRef(2026, 1, None)]),
    ("photos from last year", [DateRef(2025, None, None)]),
    ("what broke 3 days ago", [DateSpan(date(2026, 1, 1), date(2026, 1, 3))]),
    ("an update two weeks ago", [DateSpan(date(2025, 12, 19), date(2025, 12, 25))]),
    ("a month ago", [DateSpan(date(2025, 11, 26), date(2025, 12, 16))]),
    ("what happened last week", [DateSpan(date(2025, 12, 29), date(2026, 1, 4))]),
    ("what game did I beat last weekend", [DateSpan(date(2026, 1, 3), date(2026, 1, 4))]),
    ("trips in the past three months", [DateSpan(date(2025, 10, 1), date(2026, 1, 5))]),
    ("errors over the last 10 days", [DateSpan(date(2025, 12, 26), date(2026, 1, 5))]),
    ("what crashed last night", [DateSpan(date(2026, 1, 4), date(2026, 1, 5))]),
    ("the build this morning", [DateRef(2026, 1, 5)]),
    ("the last time I ran backups", []),  # no period named
    ("I need the last version", []),
])
def test_relative_dates_named_in_queries(query: str, refs: list[object]) -> None:
    assert date_refs(query, NOW) == refs


def test_the_earliest_day_named() -> None:
    assert earliest_day(date_refs("last month and 3 days ago", NOW)) == date(2025, 12, 1)
    assert earliest_day(date_refs("in July and yesterday", NOW)) is None  # July of any year


def test_memories_on_a_named_date_are_boosted() -> None:
    july = Candidate("j", datetime(2023, 7, 3, tzinfo=UTC), "j", score=0.5)
    may = Candidate("m", datetime(2023, 5, 3, tzinfo=UTC), "m", score=0.5)
    boost_dated([july, may], date_refs("camping in July", NOW), 0.2)
    assert july.score == pytest.approx(0.7) and july.components["date"] == 0.2
    assert may.score == 0.5
    boost_dated([may], [], 0.2)
    assert may.score == 0.5


@pytest.mark.parametrize(("query", "boosted"), [
    ("how often do I play tennis", {"u": 0.3}),
    ("what did Caroline say about my tennis", {"c": 0.1, "u": 0.3}),
    ("what did Caroline say about tennis", {"c": 0.1}),
    ("what is Caroline's favourite racket", {"c": 0.1}),
    ("which racket did you suggest to me", {}),   # about the agent's words
    ("how often does the user play tennis", {}),  # "user" names no one in particular
])
def test_actors_a_query_names_and_the_first_person(query: str, boosted: dict[str, float]) -> None:
    cands = [Candidate(k, NOW, "tennis", score=0.5) for k in ("u", "a", "c")]
    boost_actors(cands, {"u": "user", "a": "assistant", "c": "Caroline"},
                 actor_boosts(query, 0.1, asker="user", asker_boost=0.3))
    assert {c.key: c.components["actor"] for c in cands if "actor" in c.components} == boosted
    assert all(c.score == pytest.approx(0.5 + boosted.get(c.key, 0)) for c in cands)


def test_shares_decay_with_distance_on_either_side() -> None:
    hit = Candidate("h", NOW, "h", score=1.0)
    rows = [("b2", _row("b2", NOW - timedelta(seconds=2))), ("b1", _row("b1", NOW - timedelta(seconds=1))),
            ("a1", _row("a1", NOW + timedelta(seconds=1))), ("a2", _row("a2", NOW + timedelta(seconds=2)))]
    out = {c.key: c.score for c in expand([hit], {"h": rows}, 0.5, decay=0.5)}
    assert out["b1"] == out["a1"] == pytest.approx(0.5)
    assert out["b2"] == out["a2"] == pytest.approx(0.25)
