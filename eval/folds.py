"""Generalisation folds over a result's per-question scores.

A ranking change tuned on the dev questions can gain there and lose on questions it was not tuned
on. So every result is also reported on folds: LoCoMo leave-one-conversation-out (the metric on
all conversations but one, for each one); every other dataset split in halves by a hash of the
question id (deterministic, independent of order, and the same for two runs of the same data).
A change that helps on every fold is more likely to help on held-out data than one that helps on
the pooled figure only.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import metrics as M

#: The figures a change is judged by, per dataset (the first is the primary one).
HEADLINE: dict[str, tuple[str, ...]] = {
    "locomo": ("R@10", "R@5", "MRR"),
    "longmemeval": ("turn_any@5", "turn_all@5", "session_any@5", "turn_MRR"),
    "logqa": ("answered@1", "answered@5", "Hit@1", "Hit@5", "Hit@10", "MRR"),
}
#: Datasets whose folds leave one haystack (conversation) out instead of splitting in halves.
LEAVE_ONE_OUT = frozenset({"locomo"})
#: Only these categories count in the headline (LoCoMo: 1-4; others: every question).
HEADLINE_CATEGORIES: dict[str, frozenset[str]] = {"locomo": frozenset(M.LOCOMO_HEADLINE)}


@dataclass(frozen=True)
class Fold:
    name: str
    qids: frozenset[str]


def headline_metrics(result: Mapping[str, Any]) -> tuple[str, ...]:
    """The dataset's headline metrics; for a dataset not listed, every metric its questions have
    (in first-seen order)."""
    known = HEADLINE.get(str(result.get("dataset")))
    if known:
        return known
    seen: dict[str, None] = {}
    for q in result.get("questions", []):
        seen.update(dict.fromkeys(q.get("scores", {})))
    return tuple(seen)


def haystack_of(question: Mapping[str, Any]) -> str:
    """The question's haystack (conversation): its `haystack` field, or, in results written
    before that field existed, the part of the qid before `#` (`conv-26#3` → `conv-26`)."""
    h = question.get("haystack")
    return str(h) if h else str(question["qid"]).split("#", 1)[0]


def half_of(qid: str) -> str:
    """`"A"` or `"B"`: the first bit of the SHA-256 of the question id."""
    return "AB"[hashlib.sha256(qid.encode("utf-8")).digest()[0] & 1]


def headline_questions(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    cats = HEADLINE_CATEGORIES.get(str(result.get("dataset")))
    return [q for q in result.get("questions", []) if cats is None or str(q["category"]) in cats]


def make_folds(result: Mapping[str, Any], qids: Iterable[str] | None = None) -> list[Fold]:
    """`all`, then the folds (empty ones left out). `qids`: restrict to these questions (the
    ones two compared runs have in common)."""
    questions = headline_questions(result)
    if qids is not None:
        keep = set(qids)
        questions = [q for q in questions if q["qid"] in keep]
    every = frozenset(q["qid"] for q in questions)
    folds = [Fold("all", every)]
    if result.get("dataset") in LEAVE_ONE_OUT:
        for h in sorted({haystack_of(q) for q in questions}):
            folds.append(Fold(f"without {h}",
                              frozenset(q["qid"] for q in questions if haystack_of(q) != h)))
    else:
        for half in "AB":
            folds.append(Fold(f"half {half}",
                              frozenset(q["qid"] for q in questions if half_of(q["qid"]) == half)))
    return [f for f in folds if f.qids]


def fold_means(questions: Sequence[Mapping[str, Any]], fold: Fold, metrics: Sequence[str],
               scores_key: str = "scores") -> dict[str, Any]:
    """{"n": questions in the fold, metric: mean over the fold's questions that have it}."""
    sel = [q[scores_key] for q in questions if q["qid"] in fold.qids and scores_key in q]
    out: dict[str, Any] = {"n": len(sel)}
    for m in metrics:
        vals = [float(s[m]) for s in sel if m in s]
        if vals:
            out[m] = statistics.fmean(vals)
    return out


def fold_table(result: Mapping[str, Any], scores_key: str = "scores"
               ) -> dict[str, dict[str, Any]]:
    """Fold name → its headline means."""
    metrics = headline_metrics(result)
    questions = result.get("questions", [])
    return {f.name: fold_means(questions, f, metrics, scores_key) for f in make_folds(result)}
