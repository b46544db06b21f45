"""Learning the question map (eval/query_adapter.py) and reporting it leave one conversation out
(eval/query_map_cv.py), on synthetic vectors: questions are their answers turned by a fixed
rotation, which the identity cannot see through and a learned map can."""

from __future__ import annotations

import numpy as np

from eval.query_adapter import Group, Settings, recall_at, train
from eval.query_map_cv import render, summarise


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def groups(rotation: np.ndarray, seed: int, n: int = 4) -> list[Group]:
    rng = np.random.default_rng(seed)
    out = []
    for g in range(n):
        docs = _unit(rng.normal(size=(60, rotation.shape[0])))
        gold = [np.array([i]) for i in range(0, 60, 3)]
        questions = _unit(docs[0::3] @ rotation.T + 0.1 * rng.normal(size=(20, rotation.shape[0])))
        out.append(Group(f"conv-{seed}-{g}", questions, docs, gold))
    return out


def test_a_map_learned_on_some_conversations_finds_the_answers_of_others() -> None:
    d = 16
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(d, d)))  # a fixed rotation
    seen, unseen = groups(q, 1), groups(q, 2)
    w = train(seen, Settings(lam=0.01, steps=300, lr=0.5))
    eye = np.eye(d)
    before = np.mean([recall_at(eye, g, 3).mean() for g in unseen])
    after = np.mean([recall_at(w, g, 3).mean() for g in unseen])
    assert before < 0.4 < 0.8 < after, (before, after)


def test_the_pull_towards_the_identity_keeps_a_map_near_it() -> None:
    d = 16
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(d, d)))
    seen = groups(q, 1)
    loose = train(seen, Settings(lam=0.0, steps=100))
    tight = train(seen, Settings(lam=10.0, steps=100))
    assert np.linalg.norm(tight - np.eye(d)) < np.linalg.norm(loose - np.eye(d))
    # and the same data gives the same map
    assert np.array_equal(train(seen, Settings(steps=20)), train(seen, Settings(steps=20)))


def _q(qid: str, conv: str, cat: str, r10: float) -> dict[str, object]:
    return {"qid": qid, "haystack": conv, "category": cat,
            "scores": {"R@10": r10, "R@5": r10, "MRR": r10}}


def test_the_cv_table_pairs_each_question_off_and_on_by_fold_and_class() -> None:
    off = [_q("a#0", "conv-a", "1", 0.0), _q("a#1", "conv-a", "4", 1.0),
           _q("b#0", "conv-b", "2", 0.5), _q("b#1", "conv-b", "5", 0.0)]
    on = [_q("a#0", "conv-a", "1", 1.0), _q("a#1", "conv-a", "4", 1.0),
          _q("b#0", "conv-b", "2", 0.5), _q("b#1", "conv-b", "5", 1.0)]
    s = summarise(off, on)
    assert s["pooled"]["n"] == 3  # adversarial (5) is not in the headline
    assert s["folds"]["conv-a"]["off"]["R@10"] == 0.5 and s["folds"]["conv-a"]["on"]["R@10"] == 1.0
    assert s["folds"]["conv-b"]["off"] == s["folds"]["conv-b"]["on"]
    assert s["classes"]["1 multi-hop"]["on"]["R@10"] == 1.0
    text = render({"run_at": "2026-11-29T19:00:00+00:00", "commit": "abc1234", "dirty": False,
                   "machine": "machine: test box", **s})
    assert "| conv-a | 2 | 0.500 → 1.000 (+0.500)" in text
    assert "**pooled** | 3" in text and "abc1234" in text and "test box" in text
