"""Retrieval metrics exactly as the benchmark data's README defines them (copied below).

LoCoMo: R@k = |gold ∩ top-k| / |gold|; Hit@5 = any gold in top 5; MRR = 1/rank of the first gold
hit (0 when none is retrieved). LongMemEval: the same at turn level (recall_any@5, recall_all@5,
MRR) and at session level, where the ranked turns are mapped to their sessions and deduplicated first.

LogQA: Hit@k and MRR of the gold line, and answered@k: a line among the first k answers the
question (`answers_question`). Many lines of one template differ only in values the question
does not name ("What is the status of packet responder 2?"): Hit@k asks a ranking to guess which
of them the question's author copied, answered@k only that it finds a line that answers.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass


def recall_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold = set(gold)
    if not gold:
        return 0.0
    return len(gold & set(ranked[:k])) / len(gold)


def hit_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold = set(gold)
    return 1.0 if any(r in gold for r in ranked[:k]) else 0.0


def all_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    gold = set(gold)
    return 1.0 if gold and gold <= set(ranked[:k]) else 0.0


def mrr(ranked: Sequence[str], gold: Iterable[str]) -> float:
    gold = set(gold)
    for i, r in enumerate(ranked, start=1):
        if r in gold:
            return 1.0 / i
    return 0.0


def dedupe(seq: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for s in seq:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def sessions_of(ranked: Sequence[str], session_of: Mapping[str, str]) -> list[str]:
    """Ranked turn ids → ranked session ids (first appearance; unknown ids are skipped)."""
    return dedupe(session_of[r] for r in ranked if r in session_of)


def locomo_scores(ranked: Sequence[str], gold: Iterable[str]) -> dict[str, float]:
    gold = set(gold)
    return {"R@5": recall_at(ranked, gold, 5), "R@10": recall_at(ranked, gold, 10),
            "Hit@5": hit_at(ranked, gold, 5), "MRR": mrr(ranked, gold)}


def longmemeval_scores(ranked: Sequence[str], gold_turns: Iterable[str],
                       gold_sessions: Iterable[str], session_of: Mapping[str, str]
                       ) -> dict[str, float]:
    """Session-level metrics always; turn-level only when the question has gold turns."""
    gold_turns, gold_sessions = set(gold_turns), set(gold_sessions)
    ranked_sessions = sessions_of(ranked, session_of)
    out = {"session_any@5": hit_at(ranked_sessions, gold_sessions, 5),
           "session_all@5": all_at(ranked_sessions, gold_sessions, 5),
           "session_MRR": mrr(ranked_sessions, gold_sessions)}
    if gold_turns:
        out.update({"turn_any@5": hit_at(ranked, gold_turns, 5),
                    "turn_all@5": all_at(ranked, gold_turns, 5),
                    "turn_MRR": mrr(ranked, gold_turns)})
    return out


def logqa_scores(ranked: Sequence[str], gold: Iterable[str],
                 answers: Callable[[str], bool] | None = None) -> dict[str, float]:
    """LogQA: Hit@1/5/10 and MRR of the first gold line; with `answers` (line id → does that
    line answer the question, `answers_question`), answered@1/5/10 too. A gold line always
    answers."""
    gold = set(gold)
    out = {"Hit@1": hit_at(ranked, gold, 1), "Hit@5": hit_at(ranked, gold, 5),
           "Hit@10": hit_at(ranked, gold, 10), "MRR": mrr(ranked, gold)}
    if answers is not None:
        good = [r in gold or answers(r) for r in ranked]
        out.update({f"answered@{k}": 1.0 if any(good[:k]) else 0.0 for k in (1, 5, 10)})
    return out


#: A token of a log line or question: identifiers whole (`blk_-1608`, `10.251.73.220`, `16.0`),
#: split at `:` and `/` (an address and its port are two tokens).
_TOKEN = re.compile(r"[A-Za-z0-9_.\-]+")


def tokens(text: str) -> frozenset[str]:
    """Lower-cased whole tokens, without a sentence's trailing dot."""
    return frozenset(t for t in (m.strip(".-").lower() for m in _TOKEN.findall(text)) if t)


def answers_question(line: str, question: str, answer: str, gold_line: str) -> bool:
    """Does `line` answer what `question` asks of `gold_line`? It holds the gold answer
    (case-insensitive), and every token of the question with a digit in it that the gold line
    holds (block ids, addresses, ports, numbers), as whole tokens: a line of the same template
    with another block id answers another question. Without an answer, no line but the gold
    can be judged to answer."""
    if not answer.strip() or answer.strip().lower() not in line.lower():
        return False
    named = {t for t in tokens(question) & tokens(gold_line) if any(c.isdigit() for c in t)}
    return named <= tokens(line)


LOCOMO_METRICS = ("R@5", "R@10", "Hit@5", "MRR")
LME_METRICS = ("session_any@5", "session_all@5", "session_MRR", "turn_any@5", "turn_all@5",
               "turn_MRR")
LOGQA_METRICS = ("Hit@1", "Hit@5", "Hit@10", "MRR", "answered@1", "answered@5",
                 "answered@10")
LOCOMO_CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop",
                         "5": "adversarial"}
#: The headline set of LoCoMo: categories 1–4.
LOCOMO_HEADLINE = ("1", "2", "3", "4")


@dataclass
class Row:
    """Mean of each metric over the questions that have it, and how many those were."""
    name: str
    n: int
    means: dict[str, float]
    counts: dict[str, int]


def aggregate(per_question: Sequence[tuple[str, Mapping[str, float]]], metrics: Sequence[str],
              groups: Mapping[str, Sequence[str] | None]) -> list[Row]:
    """`per_question` = (category, scores). `groups` maps a row name to the categories it pools
    (None = every category)."""
    rows: list[Row] = []
    for name, cats in groups.items():
        sel = [s for c, s in per_question if cats is None or c in cats]
        vals: dict[str, list[float]] = defaultdict(list)
        for s in sel:
            for m in metrics:
                if m in s:
                    vals[m].append(s[m])
        rows.append(Row(name=name, n=len(sel),
                        means={m: statistics.fmean(v) for m, v in vals.items() if v},
                        counts={m: len(v) for m, v in vals.items()}))
    return rows


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]
