"""`python -m bench.history`: in how many recorded runs each target held (`bench/history.py`)."""

from __future__ import annotations

from typing import Any

from bench import runs
from bench.history import report, spreads, tally
from bench.ratios import Figure, Ratio

P99 = "recall at 20000 memories: p99 ÷ floor"
INGEST = "embedder: ingest ÷ llama.cpp alone on every core"


def _run(commit: str, dirty: bool, *ratios: Ratio, failed: tuple[str, ...] = (),
         day: int = 1) -> dict[str, Any]:
    run = runs.make_run(commit=commit, dirty=dirty, machine=f"machine: cpu {commit}",
                        load_before=[1.0, 2.0, 3.0], load_after=[2.0, 2.0, 3.0],
                        benches=["recall", "embedder"], failed=failed, args=[],
                        records=[r.as_dict() for r in ratios])
    return {**run, "time": f"2026-11-{day:02d}T10:00:00+00:00"}


RUNS = [
    _run("old", False, Ratio(P99, 3.0, 4.0, "<="), Ratio(INGEST, 0.7, 0.8, ">="), day=1),
    _run("old", True, Ratio(P99, 5.0, 4.0, "<="), day=2),  # dirty: not the commit's code
    _run("elsewhere", False, Ratio(P99, 3.5, 4.0, "<="), day=3),  # not an ancestor of HEAD
    _run("head", False, Ratio(P99, 3.9, 4.0, "<="), Ratio(INGEST, 0.9, 0.8, ">="), day=4),
    _run("head", False, failed=("recall",), day=5),  # measured nothing
]


def _ancestor(commit: str) -> bool:
    return commit in ("old", "head")


def test_n_of_m_counts_the_runs_that_measured_each_target() -> None:
    p99, ingest = tally(RUNS, _ancestor)
    assert (p99.name, p99.target) == (P99, "≤ 4.0×")
    assert (p99.held, p99.runs) == (3, 4)
    assert (p99.held_here, p99.runs_here) == (2, 2)  # the dirty and the foreign run left out
    assert (ingest.target, ingest.held, ingest.runs) == ("≥ 0.8×", 1, 2)
    assert (ingest.held_here, ingest.runs_here) == (1, 2)
    assert p99.latest["value"] == 3.9 and p99.latest_run["commit"] == "head"


def test_a_changed_target_is_a_target_of_its_own() -> None:
    runs_ = [_run("head", False, Ratio(P99, 3.0, 4.0, "<=")),
             _run("head", False, Ratio(P99, 3.0, 2.5, "<="))]
    assert [(t.target, t.held, t.runs) for t in tally(runs_, _ancestor)] == [
        ("≤ 4.0×", 1, 1), ("≤ 2.5×", 0, 1)]


def test_the_report_says_held_in_n_of_m_with_the_latest_figures() -> None:
    text = report(RUNS, _ancestor)
    assert text.startswith("5 run(s) recorded, 2026-11-01T10:00:00+00:00 to 2026-11-05")
    block = text[text.index(P99):text.index(INGEST)]
    assert "held in 3 of 4 runs; in 2 of 2 on clean commits that are HEAD or its ancestors" in block
    assert "latest 3.90× (met), 2026-11-04T10:00:00+00:00, commit head, load before 1.00" in block
    assert "machine: cpu head" in block
    assert "runs with failed benches: 2026-11-05T10:00:00+00:00 recall" in text


def test_no_runs_yet() -> None:
    assert "no runs recorded yet" in report([], _ancestor)


def test_the_cpu_figures_that_bound_recall_are_spread_over_the_clean_runs_here() -> None:
    cpu = "recall at 20000 memories: CPU per recall"
    least = "recall at 20000 memories: least mean ÷ floor p50 the CPU allows"
    runs_ = [_run("old", False, Ratio(P99, 3.0, 4.0, "<="), day=1),
             _run("head", False, day=2), _run("head", True, day=3),
             _run("elsewhere", False, day=4)]
    for run, (c, b) in zip(runs_, [(36.0, 4.5), (38.5, 5.0), (99.0, 9.0), (1.0, 1.0)],
                           strict=True):
        run["figures"] = [Figure(cpu, c, "ms").as_dict(), Figure(least, b, "×").as_dict(),
                          Figure("recall at 20000 memories: stage bm25 mean", 9.0, "ms").as_dict()]
    (c, b) = spreads(runs_, _ancestor)  # the dirty and the foreign run left out; stages too
    assert (c.name, c.values, c.latest_run["commit"]) == (cpu, [36.0, 38.5], "head")
    assert b.values == [4.5, 5.0]
    text = report(runs_, _ancestor)
    assert f"{cpu}: 36.00–38.50 ms in 2 run(s); latest 38.50 ms, commit head" in text
    assert f"{least}: 4.50–5.00× in 2 run(s)" in text
    assert "stage bm25" not in text
