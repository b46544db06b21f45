"""`python -m eval.compare OLD.json NEW.json`: two runs of the same dataset, fold by fold.

Prints the headline metrics of both runs on every generalisation fold (`eval.folds`), the
per-fold deltas, and a verdict per metric: the change *helps on every fold* (every fold's delta
is positive and the pooled one is beyond noise), *hurts on some folds* (a fold's delta is below
minus its noise), or is *within noise*. Noise of a fold = 2 × the standard error of the paired
per-question differences (both runs answered the same questions), about a 95 % interval.
Only the questions both runs have are compared. Below the folds, each class of question (LoCoMo's
categories, LongMemEval's question types, LogQA's systems) on the primary metric: where a change
gains and loses, not part of the verdict (a class is a few dozen questions).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import metrics as M
from .folds import Fold, headline_metrics, headline_questions, make_folds

NOISE_SE = 2.0


@dataclass(frozen=True)
class FoldDelta:
    fold: str
    metric: str
    n: int
    old: float
    new: float
    noise: float              # NOISE_SE × paired standard error

    @property
    def delta(self) -> float:
        return self.new - self.old

    @property
    def status(self) -> str:
        """"better" / "worse" beyond noise, else "noise"."""
        if abs(self.delta) <= max(self.noise, 1e-12):
            return "noise"
        return "better" if self.delta > 0 else "worse"


def fold_delta(old_q: Mapping[str, Mapping[str, Any]], new_q: Mapping[str, Mapping[str, Any]],
               fold: Fold, metric: str) -> FoldDelta | None:
    """The fold's paired comparison on `metric` (None when no question of it has the metric in
    both runs). `old_q` / `new_q`: qid → question record."""
    pairs = [(float(old_q[q]["scores"][metric]), float(new_q[q]["scores"][metric]))
             for q in sorted(fold.qids)
             if metric in old_q[q].get("scores", {}) and metric in new_q[q].get("scores", {})]
    if not pairs:
        return None
    diffs = [n - o for o, n in pairs]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return FoldDelta(fold=fold.name, metric=metric, n=len(pairs),
                     old=statistics.fmean(o for o, _ in pairs),
                     new=statistics.fmean(n for _, n in pairs), noise=NOISE_SE * se)


def verdict(rows: Sequence[FoldDelta]) -> str:
    """One metric's verdict over its folds (the first row is the pooled "all")."""
    if not rows:
        return "no common questions"
    worse = [r.fold for r in rows if r.status == "worse"]
    if worse:
        return "hurts on some folds: " + ", ".join(worse)
    pooled = rows[0]
    if all(r.delta > 0 for r in rows) and pooled.status == "better":
        return "helps on every fold"
    ups = sum(1 for r in rows[1:] if r.delta > 0)
    return f"within noise (higher on {ups} of {len(rows) - 1} folds)"


def compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, list[FoldDelta]]:
    """Metric → its fold deltas (pooled first), on the questions both runs have."""
    if old.get("dataset") != new.get("dataset"):
        raise ValueError(f"different datasets: {old.get('dataset')!r} vs {new.get('dataset')!r}")
    old_q = {q["qid"]: q for q in old.get("questions", [])}
    new_q = {q["qid"]: q for q in new.get("questions", [])}
    common = set(old_q) & set(new_q)
    folds = make_folds(new, qids=common)
    out: dict[str, list[FoldDelta]] = {}
    for metric in headline_metrics(new):
        out[metric] = [d for f in folds if (d := fold_delta(old_q, new_q, f, metric))]
    return out


def class_name(dataset: str, category: str) -> str:
    """"1 multi-hop" for LoCoMo's categories; other datasets' categories as they are."""
    name = M.LOCOMO_CATEGORY_NAMES.get(category) if dataset == "locomo" else None
    return f"{category} {name}" if name else category


def by_class(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FoldDelta]:
    """The primary metric per class of the headline questions both runs have (by category)."""
    metrics = headline_metrics(new)
    if not metrics:
        return []
    old_q = {q["qid"]: q for q in old.get("questions", [])}
    new_q = {q["qid"]: q for q in new.get("questions", [])}
    classes: dict[str, set[str]] = {}
    for q in headline_questions(new):
        if q["qid"] in old_q:
            classes.setdefault(str(q["category"]), set()).add(q["qid"])
    dataset = str(new.get("dataset"))
    return [d for cat in sorted(classes)
            if (d := fold_delta(old_q, new_q, Fold(class_name(dataset, cat),
                                                  frozenset(classes[cat])), metrics[0]))]


def render(old: Mapping[str, Any], new: Mapping[str, Any],
           result: Mapping[str, Sequence[FoldDelta]]) -> str:
    lines = [f"{new.get('dataset')}: OLD {old.get('run_at', '?')} vs NEW {new.get('run_at', '?')}"
             f" (noise = {NOISE_SE:g} × paired standard error)", ""]
    lines += ["| metric | fold | n | old | new | delta | noise | |",
              "|---|---|---:|---:|---:|---:|---:|---|"]
    for metric, rows in result.items():
        for r in rows:
            lines.append(f"| {metric} | {r.fold} | {r.n} | {r.old:.3f} | {r.new:.3f} | "
                         f"{r.delta:+.3f} | ±{r.noise:.3f} | {r.status} |")
    classes = by_class(old, new)
    if classes:
        lines += ["", "By class (not part of the verdict):", "",
                  "| metric | class | n | old | new | delta | noise | |",
                  "|---|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r.metric} | {r.fold} | {r.n} | {r.old:.3f} | {r.new:.3f} | "
                  f"{r.delta:+.3f} | ±{r.noise:.3f} | {r.status} |" for r in classes]
    lines.append("")
    for metric, rows in result.items():
        lines.append(f"{metric}: {verdict(rows)}")
    if result:
        primary = next(iter(result))
        lines += ["", f"Verdict ({primary}): {verdict(result[primary])}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m eval.compare", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", type=Path)
    p.add_argument("new", type=Path)
    args = p.parse_args(argv)
    old, new = (json.loads(f.read_text()) for f in (args.old, args.new))
    try:
        result = compare(old, new)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render(old, new, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
