"""Near-duplicates: the named one first, then the newest; other templates untouched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from totalrecall_recall_api.core.fusion import Candidate
from totalrecall_recall_api.core.repeats import identifiers, order_repeats, value_pairs
from totalrecall_schema.templates import template_hash

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def cand(key: str, text: str, score: float, minutes: int) -> Candidate:
    return Candidate(key, T0 + timedelta(minutes=minutes), text, score=score)


def test_identifiers_whole_and_in_parts() -> None:
    ids = identifiers("Received block blk_-1608999687919862906 of size 91178 from /10.250.10.6:50010")
    assert {"blk_-1608999687919862906", "91178", "/10.250.10.6:50010", "10.250.10.6",
            "50010"} <= ids
    assert "received" not in ids and "block" not in ids
    assert identifiers("what is using my CPU?") == frozenset()


def test_newest_of_a_template_comes_first_and_the_group_keeps_its_scores() -> None:
    ranked = [cand("old", "python3 (PID 4182) using 97% CPU", 0.80, 0),
              cand("other", "disk / is 95% full", 0.70, 5),
              cand("new", "python3 (PID 5120) using 93% CPU", 0.60, 30),
              cand("mid", "python3 (PID 4990) using 99% CPU", 0.50, 10)]
    out = order_repeats(ranked, "what's using my CPU?")
    assert [c.key for c in out] == ["new", "other", "mid", "old"]
    assert [c.score for c in out] == [0.80, 0.70, 0.60, 0.50]
    assert out[0].components["repeat_order"] == 0.2


def test_the_named_identifier_wins_over_the_newest() -> None:
    ranked = [cand("a", "PacketResponder 1 for block blk_-5623176793330377570 terminating", 0.9, 0),
              cand("b", "PacketResponder 0 for block blk_38865049064139660 terminating", 0.8, 9)]
    out = order_repeats(ranked, "what happened to blk_-5623176793330377570?")
    assert [c.key for c in out] == ["a", "b"]
    out = order_repeats(list(reversed(ranked)), "status of block blk_38865049064139660")
    assert [c.key for c in out] == ["b", "a"] and out[0].score == 0.9


def test_a_single_memory_of_its_template_is_untouched() -> None:
    ranked = [cand("a", "nginx failed", 0.9, 0), cand("b", "postgres failed", 0.8, 9)]
    out = order_repeats(ranked, "why did it fail")
    assert [(c.key, c.score) for c in out] == [("a", 0.9), ("b", 0.8)]
    assert all("repeat_order" not in c.components for c in out)


def test_explicit_evidence_wins_over_the_newest() -> None:
    """A date the question names (or another boost) is evidence, not noise."""
    sat = cand("sat", "got a necklace as a present", 0.7, 0)
    sat.components = {"vector": 0.5, "recency": 0.1, "date": 0.1}
    tue = cand("tue", "got a necklace as a present", 0.6, 60)
    tue.components = {"vector": 0.5, "recency": 0.2}
    out = order_repeats([sat, tue], "who gave me a necklace last Saturday?")
    assert [c.key for c in out] == ["sat", "tue"]


def test_the_value_in_the_questions_context_wins_over_the_newest() -> None:
    """"task 24.0" is the task, "stage 24.0" another line that merely carries the number."""
    ranked = [cand("stage", "Running task 43.0 in stage 24.0 (TID 1128)", 0.9, 30),
              cand("task", "Running task 24.0 in stage 26.0 (TID 1224)", 0.8, 0)]
    out = order_repeats(ranked, "What stage is task 24.0 running in?")
    assert [c.key for c in out] == ["task", "stage"]
    assert value_pairs("read broadcast variable 11?") == {("variable", "11")}


def test_tied_scores_still_follow_the_operators_order() -> None:
    """Members that tie (a shared vector, the same words) come out in the rule's order, not in
    the order they came in."""
    ranked = [cand(f"v{n}", f"Reading broadcast variable {n} took 1{n} ms", 0.9, n)
              for n in (39, 40, 2)]
    out = order_repeats(ranked, "How long did it take to read the variable 2?")
    assert [c.key for c in out] == ["v2", "v40", "v39"]
    assert out[0].score == 0.9 and out[0].score > out[1].score > out[2].score


def test_repeats_of_the_same_second_rank_the_same_whatever_their_noise() -> None:
    """Lines logged in one second tie on everything the operator's rule looks at; their fused
    scores differ by embedding noise only, which must not decide their order."""
    texts = {"k1": "Verification succeeded for blk_-2827716238972737794",
             "k2": "Verification succeeded for blk_-4117999745005013424",
             "k3": "Verification succeeded for blk_-1383276859207001328"}
    orders = set()
    for noise in ([0.500001, 0.5, 0.499999], [0.499999, 0.500001, 0.5], [0.5, 0.499999, 0.500001]):
        ranked = sorted((cand(k, t, s, 0) for (k, t), s in zip(texts.items(), noise, strict=True)),
                        key=lambda c: c.score, reverse=True)  # best first, as fusion hands them
        orders.add(tuple(c.key for c in order_repeats(ranked, "what was the verification result?")))
    assert len(orders) == 1


def test_only_texts_with_a_number_or_id_have_templates_worth_completing() -> None:
    from totalrecall_recall_api.core.repeats import slotted_templates, template_of

    ranked = [cand("a", "PacketResponder 2 for block blk_38865049064139660 terminating", 0.9, 0),
              cand("b", "Caroline: thanks, that helps!", 0.8, 1),
              cand("c", "PacketResponder 1 for block blk_-5623176793330377570 terminating", 0.7, 2),
              cand("d", "disk / is 95% full", 0.6, 3)]
    assert slotted_templates(ranked, 3) == [template_of(ranked[0].text)]  # one template, b none
    assert slotted_templates(ranked, 4)[-1] == template_of("disk / is 91% full")
    # "what happened to blk_-5623176793330377570?": c is the line asked about, a repeat of a's
    # template names another block; a is kept for its own template only if nothing names it.
    named = frozenset({"blk_-5623176793330377570"})
    assert slotted_templates(ranked[:3], 3, named) == []
    assert slotted_templates(ranked[:2], 2, named) == [template_of(ranked[0].text)]


def test_the_newest_repeats_join_their_template_and_the_rule_puts_the_newest_first() -> None:
    """The searches returned two old "PacketResponder 2" lines of hundreds; the store's newest
    of that template joins them at the group's lowest score, and the operator's rule then puts
    it first, with the group's best score; other templates keep theirs."""
    from totalrecall_recall_api.core.repeats import with_newest_repeats

    ranked = [cand("old1", "PacketResponder 2 for block blk_11 terminating", 0.9, 0),
              cand("other", "Verification succeeded for blk_77", 0.8, 5),
              cand("old2", "PacketResponder 2 for block blk_12 terminating", 0.7, 1)]
    newest = [cand("new", "PacketResponder 2 for block blk_99 terminating", 0.0, 60),
              cand("old1", "PacketResponder 2 for block blk_11 terminating", 0.0, 0),  # have it
              cand("stray", "Deleting block blk_5 file /data/blk_5", 0.0, 90)]  # not ranked
    out = with_newest_repeats(ranked, newest)
    assert [c.key for c in out] == ["old1", "other", "old2", "new"]
    assert out[-1].score == 0.7 and out[-1].components == {"repeat_of": 0.7}
    ordered = order_repeats(out, "what is the status of packet responder 2?")
    assert [c.key for c in ordered] == ["new", "other", "old2", "old1"]
    assert ordered[0].score == 0.9


def test_a_joined_repeat_shares_its_templates_lifts_so_the_newest_still_comes_first() -> None:
    """"latest failed password for root?": the question's intent lifted every ranked line of
    the template (they all answer it); the newest line, joined after the lifts, answers it as
    well, so the lift is no evidence for the older ones and the newest comes first."""
    from totalrecall_recall_api.core.repeats import with_newest_repeats

    ranked = [cand("old1", "Failed password for root from 10.0.0.5 port 4411 ssh2", 1.9, 0),
              cand("old2", "Failed password for root from 10.0.0.9 port 5120 ssh2", 1.7, 5),
              cand("other", "session opened for user root", 0.8, 7)]
    for c in ranked[:2]:
        c.components = {"bm25": 0.4, "vector": 0.5, "intent": 1.0}
    newest = [cand("new", "Failed password for root from 10.0.0.7 port 6001 ssh2", 0.0, 60)]
    out = with_newest_repeats(ranked, newest)
    joined = next(c for c in out if c.key == "new")
    assert joined.score == 1.7 and joined.components == {"intent": 1.0, "repeat_of": 1.7}
    ordered = order_repeats(out, "latest failed password for root?")
    assert [c.key for c in ordered] == ["new", "old2", "old1", "other"]


def test_a_score_lent_by_a_neighbour_does_not_outrank_the_newest_repeat() -> None:
    """What a neighbouring hit lends is likeness (which lines happened to be hit beside it),
    not evidence the question gives: among repeats, the newest still comes first."""
    lent = cand("lent", "PacketResponder 2 for block blk_11 terminating", 0.9, 0)
    lent.components = {"bm25": 0.5, "neighbour": 0.4}
    newest = cand("newest", "PacketResponder 2 for block blk_12 terminating", 0.5, 30)
    newest.components = {"bm25": 0.5}
    out = order_repeats([lent, newest], "status of packet responder 2?")
    assert [c.key for c in out] == ["newest", "lent"]


def test_templates_are_computed_only_where_keys_meet_and_the_order_is_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Grouping by `template_key` first leaves every group of two or more as it was; prose
    memories (keys unmet) never have their forms computed."""
    from totalrecall_recall_api.core import repeats

    def make() -> list[Candidate]:
        out = []
        for i in range(30):
            out.append(cand(f"log{i}", f"PacketResponder {i % 3} for block blk_{i * 7919} "
                                       f"terminating", 0.5 + (i % 7) / 100, i))
            out.append(cand(f"cpu{i}", f"python3 (PID {4000 + i}) using {90 + i % 9}% CPU",
                            0.4 + (i % 5) / 100, 2 * i))
            out.append(cand(f"talk{i}", f"I went hiking {i} times with my sister near lake "
                                        f"number {i} and " + "words " * i, 0.3 + i / 1000, i))
        return out

    def naive(cands: list[Candidate]) -> dict[str, list[Candidate]]:
        groups: dict[str, list[Candidate]] = {}
        for c in cands:
            groups.setdefault(template_hash(c.text), []).append(c)
        return groups

    query = "what happened to blk_7919 and PID 4003?"
    expected = order_repeats(make(), query)
    computed: list[str] = []
    monkeypatch.setattr(repeats, "template_of", lambda text: computed.append(text)
                        or template_hash(text))
    got = order_repeats(make(), query)
    assert [(c.key, c.score, c.components) for c in got] == \
        [(c.key, c.score, c.components) for c in expected]
    assert not any(t.startswith("I went hiking") for t in computed)
    assert len(computed) == 60
    monkeypatch.setattr(repeats, "_shared_templates", naive)
    again = order_repeats(make(), query)
    assert [(c.key, c.score) for c in again] == [(c.key, c.score) for c in expected]
