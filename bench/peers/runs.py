"""Several runs of each system → one row per system: the median of each figure and its spread
(pure: the per-run results in, the rows the tables print out).

A row has, for each figure key of `table.COLUMNS`, the median over the runs that have it, and
`<key>_spread` = (min, max, n). Quality figures are asked in the first run only (the same
memories and questions give the same answers), so for them n is 1.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

#: What is kept per run beside the figures (listed per run in the report).
PER_RUN = ("run", "load_before", "load_after", "searchable_all_ms", "ingest_timed_on",
           "recall_answered", "recall_n", "prompt_n")


def aggregate(runs: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """One row per system name (in order of first appearance)."""
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        by_name.setdefault(str(r["name"]), []).append(r)
    rows = []
    for name, rs in by_name.items():
        row: dict[str, Any] = {"name": name, "runs": len(rs),
                               "config": dict(rs[0].get("config") or {}),
                               "per_run": [{k: r.get(k) for k in PER_RUN} for r in rs]}
        for key in keys:
            vals = [float(r[key]) for r in rs if isinstance(r.get(key), (int, float))
                    and not isinstance(r.get(key), bool)]
            if vals:
                row[key] = statistics.median(vals)
                row[f"{key}_spread"] = (min(vals), max(vals), len(vals))
            else:
                row[key] = None
        rows.append(row)
    return rows


def sig2(x: float) -> str:
    """`x` rounded to two significant digits, never in exponent notation: 0.54, 1.0, 3.5, 18,
    1200."""
    rounded = float(f"{x:.2g}")
    if abs(rounded) >= 100:
        return str(int(rounded))
    return f"{x:#.2g}".rstrip(".")
