"""The peers table and our ratios to each peer and to the floor (pure: results in, Markdown out).

A system's result is a flat dict of the `COLUMNS` keys (a missing or None figure prints "—").
Ratios are oriented so that > 1 always means Total Recall is better: ours ÷ theirs for what is
better higher (quality, throughput), theirs ÷ ours for what is better lower (latency, memory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .runs import sig2


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    higher_is_better: bool
    fmt: str


COLUMNS: tuple[Column, ...] = (
    Column("locomo_R@5", "LoCoMo R@5", True, "{:.3f}"),
    Column("locomo_R@10", "LoCoMo R@10", True, "{:.3f}"),
    Column("logqa_Hit@1", "LogQA Hit@1", True, "{:.3f}"),
    Column("logqa_Hit@5", "LogQA Hit@5", True, "{:.3f}"),
    Column("recall_p50_ms", "recall p50 ms", False, "{:.1f}"),
    Column("recall_p99_ms", "recall p99 ms", False, "{:.1f}"),
    Column("prompt_p50_ms", "prompt p50 ms", False, "{:.1f}"),
    Column("prompt_p99_ms", "prompt p99 ms", False, "{:.1f}"),
    Column("ingest_per_s", "ingest /s", True, "{:.0f}"),
    Column("searchable_ms", "write→searchable ms", False, "{:.0f}"),
    Column("memory_mib", "memory MiB", False, "{:.0f}"),
)
OURS = "Total Recall"


def fmt(value: Any, pattern: str) -> str:
    if value is None or isinstance(value, bool):
        return "—"
    if isinstance(value, (int, float)):
        return pattern.format(value)
    return str(value)


def ratio(ours: float | None, theirs: float | None, higher_is_better: bool) -> float | None:
    """> 1: we are better by that factor; None when either is missing or a divisor is 0."""
    if ours is None or theirs is None:
        return None
    num, den = (ours, theirs) if higher_is_better else (theirs, ours)
    if den == 0:
        return None
    return float(num) / float(den)


def fmt_ratio(r: float | None) -> str:
    """Two significant digits: a ratio of two noisy figures has no more."""
    if r is None:
        return "—"
    return f"×{sig2(r)}"


def cell(s: Mapping[str, Any], c: Column) -> str:
    """The figure (a median over runs where there were several), then its spread over the runs
    (min–max) when it had more than one that differed (quality asked twice gives the same)."""
    text = fmt(s.get(c.key), c.fmt)
    spread = s.get(f"{c.key}_spread")
    if spread and spread[2] > 1 and spread[0] != spread[1] and text != "—":
        text += f" ({c.fmt.format(spread[0])}–{c.fmt.format(spread[1])})"
    return text


def results_table(systems: Sequence[Mapping[str, Any]]) -> str:
    """One row per system (`name` + the COLUMNS keys)."""
    head = "| system | " + " | ".join(c.title for c in COLUMNS) + " |"
    sep = "|---|" + "---:|" * len(COLUMNS)
    rows = ["| " + str(s["name"]) + " | " + " | ".join(cell(s, c) for c in COLUMNS) + " |"
            for s in systems]
    return "\n".join([head, sep, *rows])


def ratios_table(systems: Sequence[Mapping[str, Any]], ours_name: str = OURS) -> str:
    """Total Recall against each other system, column by column (> 1: Total Recall better)."""
    ours = next((s for s in systems if s["name"] == ours_name), None)
    if ours is None:
        return ""
    head = "| Total Recall vs | " + " | ".join(c.title for c in COLUMNS) + " |"
    sep = "|---|" + "---:|" * len(COLUMNS)
    rows = []
    for s in systems:
        if s["name"] == ours_name:
            continue
        cells = [fmt_ratio(ratio(ours.get(c.key), s.get(c.key), c.higher_is_better))
                 for c in COLUMNS]
        rows.append(f"| {s['name']} | " + " | ".join(cells) + " |")
    return "\n".join([head, sep, *rows])


def floor_lines(systems: Sequence[Mapping[str, Any]], floor_p50_ms: float | None,
                prompt_floor_p50_ms: float | None = None) -> list[str]:
    """Each system's recall p50 as a multiple of the raw embedding p50 (the floor), for the
    questions and, where given, for the whole prompts."""
    if not floor_p50_ms:
        return []
    out = []
    for s in systems:
        p50 = s.get("recall_p50_ms")
        if isinstance(p50, (int, float)):
            line = (f"- {s['name']}: recall p50 {p50:.1f} ms = {sig2(p50 / floor_p50_ms)} × "
                    f"the floor ({floor_p50_ms:.1f} ms)")
            pp50 = s.get("prompt_p50_ms")
            if prompt_floor_p50_ms and isinstance(pp50, (int, float)):
                line += (f"; whole prompts p50 {pp50:.1f} ms = {sig2(pp50 / prompt_floor_p50_ms)}"
                         f" × their floor ({prompt_floor_p50_ms:.1f} ms)")
            out.append(line)
    return out
