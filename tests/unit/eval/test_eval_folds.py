"""Generalisation folds over per-question scores (pure, synthetic result dicts)."""

from __future__ import annotations

from typing import Any

import pytest

from eval.folds import fold_table, half_of, haystack_of, headline_metrics, make_folds


def _q(qid: str, cat: str, r10: float, haystack: str | None = None) -> dict[str, Any]:
    q: dict[str, Any] = {"qid": qid, "category": cat,
                         "scores": {"R@10": r10, "R@5": r10, "MRR": r10 / 2}}
    if haystack:
        q["haystack"] = haystack
    return q


def test_locomo_leaves_one_conversation_out_and_only_counts_categories_1_to_4() -> None:
    result = {"dataset": "locomo", "questions": [
        _q("conv-1#0", "1", 1.0), _q("conv-1#1", "4", 0.0),
        _q("conv-2#0", "2", 1.0), _q("conv-3#0", "3", 0.5),
        _q("conv-3#1", "5", 1.0),                           # adversarial: not in the headline
    ]}
    folds = {f.name: f.qids for f in make_folds(result)}
    assert list(folds) == ["all", "without conv-1", "without conv-2", "without conv-3"]
    assert folds["all"] == {"conv-1#0", "conv-1#1", "conv-2#0", "conv-3#0"}
    assert folds["without conv-1"] == {"conv-2#0", "conv-3#0"}
    table = fold_table(result)
    assert table["all"]["n"] == 4 and table["all"]["R@10"] == pytest.approx(2.5 / 4)
    assert table["without conv-1"]["R@10"] == pytest.approx(0.75)
    assert table["without conv-2"]["R@10"] == pytest.approx(1.5 / 3)
    assert table["without conv-3"]["MRR"] == pytest.approx(1 / 3)   # R@10 / 2 averaged


def test_haystack_field_wins_over_the_qid_prefix() -> None:
    assert haystack_of({"qid": "conv-7#3"}) == "conv-7"
    assert haystack_of({"qid": "x#1", "haystack": "conv-9"}) == "conv-9"


def test_split_halves_are_by_hash_not_order_and_cover_every_question() -> None:
    qids = [f"q{i}" for i in range(200)]
    result = {"dataset": "longmemeval",
              "questions": [{"qid": q, "category": "c", "scores": {"turn_any@5": 1.0}}
                            for q in qids]}
    folds = {f.name: f.qids for f in make_folds(result)}
    assert set(folds) == {"all", "half A", "half B"}
    assert folds["half A"] | folds["half B"] == set(qids)
    assert not folds["half A"] & folds["half B"]
    assert 60 < len(folds["half A"]) < 140                   # roughly balanced
    assert {f"q{i}" for i in range(100)} != folds["half A"]  # not the first half by order
    shuffled = dict(result, questions=list(reversed(result["questions"])))
    assert {f.name: f.qids for f in make_folds(shuffled)} == folds   # order-independent
    assert all(half_of(q) == ("A" if q in folds["half A"] else "B") for q in qids)


def test_restricting_to_common_questions_and_dropping_empty_folds() -> None:
    result = {"dataset": "locomo", "questions": [_q("conv-1#0", "1", 1.0),
                                                 _q("conv-2#0", "1", 0.0)]}
    folds = {f.name: f.qids for f in make_folds(result, qids={"conv-1#0"})}
    assert folds == {"all": {"conv-1#0"}}                    # "without conv-1" would be empty


def test_headline_metrics_known_and_unknown_datasets() -> None:
    assert headline_metrics({"dataset": "logqa"})[0] == "answered@1"
    unknown = {"dataset": "workstation",
               "questions": [{"qid": "a", "category": "x", "scores": {"ok": 1.0}},
                             {"qid": "b", "category": "x", "scores": {"ok": 0.0, "rank": 2.0}}]}
    assert headline_metrics(unknown) == ("ok", "rank")
    table = fold_table(unknown)
    assert table["all"] == {"n": 2, "ok": 0.5, "rank": 2.0}


def test_a_baseline_gets_the_same_folds() -> None:
    result = {"dataset": "logqa", "questions": [
        {"qid": f"S/train#{i}", "category": "S train",
         "scores": {"Hit@1": 0.0}, "bm25_scores": {"Hit@1": 1.0}} for i in range(10)]}
    ours, bm25 = fold_table(result), fold_table(result, scores_key="bm25_scores")
    assert ours.keys() == bm25.keys()
    assert all(row.get("Hit@1") == 0.0 for row in ours.values())
    assert all(row.get("Hit@1") == 1.0 for row in bm25.values())
