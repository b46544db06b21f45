"""bench/peers: ratios, the tables and the report are pure functions of a result."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.peers.report import render
from bench.peers.runs import aggregate, sig2
from bench.peers.table import (
    COLUMNS,
    floor_lines,
    fmt_ratio,
    ratio,
    ratios_table,
    results_table,
)

OURS = {"name": "Total Recall", "locomo_R@5": 0.7, "locomo_R@10": 0.8, "logqa_Hit@1": 0.75,
        "logqa_Hit@5": 0.9, "recall_p50_ms": 20.0, "recall_p99_ms": 40.0, "prompt_p50_ms": 30.0,
        "prompt_p99_ms": 50.0, "ingest_per_s": 120.0, "searchable_ms": 300.0,
        "memory_mib": 800.0}
PEER = {"name": "peer", "locomo_R@5": 0.35, "locomo_R@10": 0.5, "logqa_Hit@1": 0.25,
        "logqa_Hit@5": None, "recall_p50_ms": 60.0, "recall_p99_ms": 30.0, "prompt_p50_ms": 90.0,
        "prompt_p99_ms": 500.0, "ingest_per_s": 240.0, "searchable_ms": 3000.0,
        "memory_mib": 400.0}


def test_ratio_is_above_one_when_we_are_better_either_way() -> None:
    assert ratio(0.7, 0.35, higher_is_better=True) == 2.0
    assert ratio(20.0, 60.0, higher_is_better=False) == 3.0      # we are 3x faster
    assert ratio(800.0, 400.0, higher_is_better=False) == 0.5    # we use twice the memory


def test_ratio_missing_or_zero_divisor_is_none() -> None:
    assert ratio(None, 1.0, True) is None
    assert ratio(1.0, None, False) is None
    assert ratio(1.0, 0.0, True) is None
    assert ratio(0.0, 5.0, False) is None


def test_fmt_ratio_two_significant_digits() -> None:
    assert fmt_ratio(None) == "—"
    assert fmt_ratio(2.0) == "×2.0"
    assert fmt_ratio(0.5) == "×0.50"
    assert fmt_ratio(0.0543) == "×0.054"
    assert fmt_ratio(17.7) == "×18"
    assert fmt_ratio(123.4) == "×120"


def test_sig2_never_uses_exponents() -> None:
    assert [sig2(x) for x in (3.54, 99.6, 1234.0, 0.999)] == ["3.5", "100", "1200", "1.0"]


def test_results_table_rows_and_missing_figures() -> None:
    text = results_table([OURS, PEER])
    lines = text.splitlines()
    assert lines[0].startswith("| system | LoCoMo R@5 | LoCoMo R@10 |")
    assert lines[2] == ("| Total Recall | 0.700 | 0.800 | 0.750 | 0.900 | 20.0 | 40.0 | 30.0 | "
                        "50.0 | 120 | 300 | 800 |")
    assert ("| peer | 0.350 | 0.500 | 0.250 | — | 60.0 | 30.0 | 90.0 | 500.0 | 240 | 3000 | "
            "400 |") in lines


def test_ratios_table_one_row_per_peer() -> None:
    rows = ratios_table([OURS, PEER]).splitlines()
    assert len(rows) == 3
    assert rows[2] == ("| peer | ×2.0 | ×1.6 | ×3.0 | — | ×3.0 | ×0.75 | ×3.0 | ×10 | ×0.50 | "
                       "×10 | ×0.50 |")
    assert ratios_table([PEER]) == ""      # without our row there is nothing to compare


def test_floor_lines() -> None:
    assert floor_lines([OURS, PEER], None) == []
    lines = floor_lines([OURS, {"name": "x", "recall_p50_ms": None}], 4.0)
    assert lines == ["- Total Recall: recall p50 20.0 ms = 5.0 × the floor (4.0 ms)"]
    lines = floor_lines([OURS], 4.0, 10.0)
    assert lines[0].endswith("; whole prompts p50 30.0 ms = 3.0 × their floor (10.0 ms)")


def test_aggregate_takes_the_median_and_keeps_the_spread() -> None:
    runs = [{**OURS, "run": 1, "recall_p50_ms": 30.0},
            {**OURS, "run": 2, "recall_p50_ms": 10.0, "locomo_R@5": None},
            {**OURS, "run": 3, "recall_p50_ms": 20.0, "locomo_R@5": None},
            {**PEER, "run": 1}]
    rows = aggregate(runs, [c.key for c in COLUMNS])
    assert [r["name"] for r in rows] == ["Total Recall", "peer"]
    ours = rows[0]
    assert ours["runs"] == 3 and ours["recall_p50_ms"] == 20.0
    assert ours["recall_p50_ms_spread"] == (10.0, 30.0, 3)
    assert ours["locomo_R@5"] == 0.7 and ours["locomo_R@5_spread"][2] == 1   # asked once
    assert rows[1]["logqa_Hit@5"] is None
    line = results_table(rows).splitlines()[2]
    assert "| 20.0 (10.0–30.0) |" in line and "| 0.700 |" in line
    same = aggregate([{**OURS, "run": 1}, {**OURS, "run": 2}], [c.key for c in COLUMNS])
    assert "| 0.700 | 0.800 |" in results_table(same)      # equal runs: no (x–x)


def test_render_has_date_machine_tables_and_failures() -> None:
    result = {"run_at": "2026-11-25T11:00:00+00:00", "machine": "machine: X, 2 cpus",
              "k": 10, "latency_corpus": {"n": 20000, "queries": 305},
              "floor": {"model": "m.gguf", "n": 305, "p50_ms": 4.0,
                        "threads_1": {"p50_ms": 4.0, "p99_ms": 6.0}},
              "systems": [OURS, PEER], "unavailable": {"other": "needs a GPU"}}
    text = render(result)
    assert "Run 2026-11-25T11:00:00+00:00; machine: X, 2 cpus. The machine was shared" in text
    assert "one namespace of 20000 memories" in text and "300\ndistinct" in text
    assert "1 thread(s): p50 4.00 ms, p99 6.00 ms" in text
    assert "| peer | ×2.0 |" in text
    assert "- **other**: needs a GPU" in text


def test_render_names_the_quality_corpora_of_a_smaller_run() -> None:
    result = {"run_at": "t", "machine": "m", "latency_corpus": {"n": 3000, "queries": 105},
              "quality": [{"key": "locomo/conv-26", "memories": 419, "questions": 197}],
              "runs": [{**OURS, "run": 1}], "unavailable": {}}
    text = render(result)
    assert "What each system gets: locomo/conv-26 (419 memories, 197 questions)" in text
    assert "every LoCoMo dev conversation" not in text
    assert "runs completed per system: Total Recall 1" in text


def test_the_commit_is_dirty_for_code_not_for_the_results_it_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.peers.__main__ import _commit

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    for f in ("bench/results/peers.json", "docs/peers.md", "code.py"):
        (tmp_path / f).write_text("a")
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "x", "--allow-empty")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "files")
    monkeypatch.chdir(tmp_path)
    clean = _commit()
    assert clean is not None and not clean.endswith("+")
    # A first run's results, then a --merge run of the same tree: the same commit.
    (tmp_path / "bench/results/peers.json").write_text("b")
    (tmp_path / "docs/peers.md").write_text("b")
    assert _commit() == clean
    (tmp_path / "code.py").write_text("b")
    assert _commit() == clean + "+"
