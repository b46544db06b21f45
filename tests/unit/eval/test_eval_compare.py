"""`python -m eval.compare`: per-fold deltas and the verdict (pure, synthetic result dicts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eval.compare import compare, main, verdict


def _run(hits: dict[str, float], dataset: str = "logqa") -> dict[str, Any]:
    return {"dataset": dataset, "run_at": "t", "questions": [
        {"qid": q, "category": "S train", "haystack": q.split("#")[0],
         "scores": {"Hit@1": h, "Hit@5": h, "Hit@10": h, "MRR": h}} for q, h in hits.items()]}


QIDS = [f"S/train#{i}" for i in range(100)]


def test_a_change_that_fixes_questions_everywhere_helps_on_every_fold() -> None:
    old = _run({q: 0.0 for q in QIDS})
    new = _run({q: 1.0 if i % 2 == 0 else 0.0 for i, q in enumerate(QIDS)})
    result = compare(old, new)
    rows = result["Hit@1"]
    assert [r.fold for r in rows] == ["all", "half A", "half B"]
    assert rows[0].old == 0.0 and rows[0].new == pytest.approx(0.5)
    assert rows[0].delta == pytest.approx(0.5) and rows[0].status == "better"
    assert verdict(rows) == "helps on every fold"


def test_identical_runs_are_within_noise() -> None:
    run = _run({q: float(i % 3 == 0) for i, q in enumerate(QIDS)})
    rows = compare(run, run)["Hit@1"]
    assert all(r.delta == 0 and r.status == "noise" for r in rows)
    assert verdict(rows).startswith("within noise")


def test_one_flip_among_many_is_noise() -> None:
    old = _run({q: float(i % 2) for i, q in enumerate(QIDS)})
    new = dict(old, questions=[dict(q, scores=dict(q["scores"])) for q in old["questions"]])
    new["questions"][0]["scores"]["Hit@1"] = 1.0            # one question better
    rows = compare(old, new)["Hit@1"]
    assert rows[0].delta == pytest.approx(0.01) and rows[0].status == "noise"
    assert verdict(rows).startswith("within noise")


def test_a_change_that_breaks_one_half_hurts_on_some_folds() -> None:
    old = _run({q: 1.0 for q in QIDS})
    probe = compare(old, old)["Hit@1"]
    half_a = {q for q in QIDS if q in _half(old, "half A")}
    assert half_a and len(half_a) < len(QIDS) and probe
    new = _run({q: 0.0 if q in half_a else 1.0 for q in QIDS})
    rows = compare(old, new)["Hit@1"]
    assert verdict(rows) == "hurts on some folds: all, half A"
    assert [r.status for r in rows] == ["worse", "worse", "noise"]


def _half(run: dict[str, Any], name: str) -> set[str]:
    from eval.folds import make_folds

    return set(next(f.qids for f in make_folds(run) if f.name == name))


def test_only_common_questions_are_compared_and_datasets_must_match() -> None:
    old = _run({q: 0.0 for q in QIDS[:50]})
    new = _run({q: 1.0 for q in QIDS})
    assert compare(old, new)["Hit@1"][0].n == 50
    with pytest.raises(ValueError, match="different datasets"):
        compare(old, _run({}, dataset="locomo"))


def _locomo(scores: dict[str, tuple[str, float]]) -> dict[str, Any]:
    """A LoCoMo result: qid → (category, the score of every metric)."""
    return {"dataset": "locomo", "run_at": "t", "questions": [
        {"qid": q, "category": cat, "scores": {"R@10": v, "R@5": v, "MRR": v}}
        for q, (cat, v) in scores.items()]}


def _main(tmp_path: Path, old: dict[str, Any], new: dict[str, Any]) -> int:
    """`python -m eval.compare` on the two results, written to files."""
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    return main([str(tmp_path / "old.json"), str(tmp_path / "new.json")])


def test_locomo_folds_and_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qids = [f"conv-{c}#{i}" for c in (1, 2, 3) for i in range(20)]
    old = _locomo({q: ("4", 0.0) for q in qids})
    new = _locomo({q: ("4", 1.0 if int(q.split("#")[1]) < 10 else 0.0) for q in qids})
    assert _main(tmp_path, old, new) == 0
    out = capsys.readouterr().out
    assert "| R@10 | without conv-2 | 40 | 0.000 | 0.500 | +0.500 |" in out
    assert "Verdict (R@10): helps on every fold" in out
    (tmp_path / "other.json").write_text(json.dumps(_run({q: 1.0 for q in QIDS})))
    assert main([str(tmp_path / "old.json"), str(tmp_path / "other.json")]) == 2


def test_each_class_is_shown_apart_and_stays_out_of_the_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qids = [f"conv-{c}#{i}" for c in (1, 2) for i in range(20)]
    # multi-hop (category 1) gains on every question, open-domain (3) loses on every one, the
    # adversarial category (5) is no headline class
    cat = {q: "1" if i % 3 == 0 else "3" if i % 3 == 1 else "5" for i, q in enumerate(qids)}
    old = _locomo({q: (cat[q], 0.5) for q in qids})
    new = _locomo({q: (cat[q], {"1": 1.0, "3": 0.0, "5": 1.0}[cat[q]]) for q in qids})
    assert _main(tmp_path, old, new) == 0
    out = capsys.readouterr().out
    assert "| R@10 | 1 multi-hop | 14 | 0.500 | 1.000 | +0.500 |" in out
    assert "| R@10 | 3 open-domain | 13 | 0.500 | 0.000 | -0.500 |" in out
    assert "5 adversarial" not in out
    # the verdict is the folds' alone: there the gain and the loss nearly cancel (14 up, 13 down)
    assert "Verdict (R@10): within noise" in out
