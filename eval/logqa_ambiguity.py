"""Which LogQA questions single out their line, and what Hit@k that allows.

A question is asked of one log line (its gold), but many lines share that line's template
("PacketResponder <n> for block <id> terminating"). When every word the question repeats from
its gold line is also in other lines of the same template ("What is the status of packet
responder 2?"), nothing in the question tells those lines apart: a ranking can only pick one of
them by a rule of its own (the operator's: the newest first). This counts, per question, the
lines of the gold's template that hold every word the question shares with the gold ("fitting"
lines), and the Hit@k a ranking gets if it puts the fitting lines first in random order. The
same for answered@k (`metrics.answers_question`): of the fitting lines, those that hold the gold
answer and every value the question names answer it, and a ranking that can tell no fitting
line from another finds one of them among its first k with this chance. A target above that
bound asks a ranking to guess which line the question's author had in mind.

    python -m eval.logqa_ambiguity [eval/results/logqa.json] [--k 5]
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .datasets import default_data_dir
from .logqa import SYSTEMS, load_lines
from .metrics import answers_question

_WORD = re.compile(r"[\w.:/@-]+")


def words(text: str) -> frozenset[str]:
    """Lower-cased tokens, identifiers whole (`10.251.73.220:50010`, `blk_-12`, `16.0`)."""
    return frozenset(w for w in (t.strip(".:-").lower() for t in _WORD.findall(text)) if w)


def fitting_lines(question: str, gold: str, template_lines: Iterable[str]) -> list[str]:
    """The lines of the gold's template (`template_lines`, the gold's own content included)
    that hold every word the question shares with the gold line, each once."""
    asked = words(question) & words(gold)
    return [c for c in set(template_lines) if asked <= words(c)]


def fitting(question: str, gold: str, template_lines: Iterable[str]) -> int:
    """How many `fitting_lines` there are: at least 1, the gold."""
    return max(1, len(fitting_lines(question, gold, template_lines)))


def random_order_hit(n_fitting: int, k: int) -> float:
    """Hit@k of a ranking that puts the `n_fitting` lines first, in random order."""
    return min(1.0, k / n_fitting)


def random_order_answered(n_fitting: int, n_answering: int, k: int) -> float:
    """The chance that a random order of `n_fitting` lines, `n_answering` of them answering,
    has an answering line among its first k."""
    n_answering = max(1, min(n_answering, n_fitting))
    if n_fitting - n_answering < k:
        return 1.0
    return 1.0 - math.comb(n_fitting - n_answering, k) / math.comb(n_fitting, k)


def load_templates(data_dir: Path) -> dict[str, tuple[str, str]]:
    """Line id (`hdfs:17`) → (template id, content), from the structured CSVs."""
    return {ln.id: (ln.template, ln.content) for system in SYSTEMS
            for ln in load_lines(data_dir / "logqa" / f"{system}_2k.log_structured.csv", system)}


def summarise(questions: Iterable[Mapping[str, Any]], lines: Mapping[str, tuple[str, str]],
              k: int) -> dict[str, Any]:
    by_template: dict[tuple[str, str], list[str]] = {}
    for key, (template, content) in lines.items():
        by_template.setdefault((key.split(":")[0], template), []).append(content)
    n = ambiguous = ambiguous_missed = missed = 0
    bound = answered_bound = 0.0
    for q in questions:
        gold = q["gold"][0]
        template, content = lines[gold]
        fits = fitting_lines(q["question"], content, by_template[(gold.split(":")[0], template)])
        fit = max(1, len(fits))
        hit = float(q["scores"][f"Hit@{k}"]) >= 1
        n += 1
        bound += random_order_hit(fit, k)
        answering = sum(1 for c in fits if answers_question(
            c, q["question"], str(q.get("answer", "")), content))
        answered_bound += random_order_answered(fit, answering, k)
        missed += not hit
        if fit > k:
            ambiguous += 1
            ambiguous_missed += not hit
    return {"questions": n, f"fit_more_than_{k}": ambiguous, f"missed_at_{k}": missed,
            f"missed_at_{k}_fit_more_than_{k}": ambiguous_missed,
            f"hit_at_{k}_fitting_first_random_order": round(bound / max(n, 1), 3),
            f"answered_at_{k}_fitting_first_random_order": round(answered_bound / max(n, 1), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", default="eval/results/logqa.json")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--data-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    run = json.loads(Path(args.results).read_text())
    lines = load_templates(args.data_dir or default_data_dir())
    print(json.dumps(summarise(run["questions"], lines, args.k), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
