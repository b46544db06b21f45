"""The ratios a bench emits beside its printed lines, and reading them back (`bench/ratios.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import ratios
from bench.embedder_bench import Round, summarise
from bench.embedder_bench import ratio_lines as embedder_lines
from bench.embedder_bench import ratios as embedder_ratios
from bench.floor import Floor, floor_ratios
from bench.floor import ratio_lines as floor_lines
from bench.ratios import Figure, Ratio, emit, parse, read


def test_a_ratio_is_met_on_the_side_of_its_comparison() -> None:
    assert Ratio("latency", 1.5, 1.5, "<=").met
    assert not Ratio("latency", 1.51, 1.5, "<=").met
    assert Ratio("ingest", 0.8, 0.8, ">=").met
    assert not Ratio("ingest", 0.79, 0.8, ">=").met


def test_without_a_results_file_a_bench_prints_the_records_after_the_prefix(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ratios.ENV, raising=False)
    emit(Ratio("q", 2.5, 1.5, "<=", {"busy ms": 25.0, "idle ms": 10.0}),
         Figure("stage embed mean", 4.2, "ms", {"n": 300}))
    out = capsys.readouterr().out
    assert all(line.startswith(ratios.PREFIX) for line in out.splitlines())
    ratio, figure = parse(["some printed line", *out.splitlines(), "p50 12 ms"])
    assert ratio == {"kind": "ratio", "name": "q", "value": 2.5, "target": 1.5,
                     "comparison": "<=", "raw": {"busy ms": 25.0, "idle ms": 10.0}, "met": False}
    assert figure == {"kind": "figure", "name": "stage embed mean", "value": 4.2, "unit": "ms",
                      "raw": {"n": 300}}


def test_with_a_results_file_the_records_are_appended_there_and_nothing_printed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "embedder.jsonl"
    monkeypatch.setenv(ratios.ENV, str(out))
    emit(Ratio("a", 1.0, 2.0, "<="))
    emit(Ratio("b", 0.5, 0.8, ">="))
    assert capsys.readouterr().out == ""
    assert [(r["name"], r["met"]) for r in read(out)] == [("a", True), ("b", False)]


def test_parsing_skips_text_torn_json_and_foreign_objects(tmp_path: Path) -> None:
    good = json.dumps(Ratio("a", 1.0, 2.0, "<=").as_dict())
    lines = ["p99 under ingest ÷ idle 1.2×", ratios.PREFIX + good[:20], '{"kind": "other"}',
             '{"name": "x"}', "[1, 2]", good]
    assert [r["name"] for r in parse(lines)] == ["a"]
    assert read(tmp_path / "missing.jsonl") == []


def test_the_embedder_bench_emits_what_it_prints() -> None:
    raw_all = {"1 worker": 20.0, "2 workers": 36.0}
    svc = {"service texts/s": 30.0, "query idle p99 ms": 10.0, "query under ingest p99 ms": 16.0}
    ingest, query = embedder_ratios(raw_all, svc)
    assert (ingest.value, ingest.comparison, ingest.target) == (pytest.approx(30 / 36), ">=", 0.8)
    assert ingest.met and ingest.raw["llama.cpp alone on every core texts/s"] == 36.0
    assert (query.value, query.met) == (pytest.approx(1.6), False)
    assert embedder_lines(raw_all, svc) == [
        "  ingest ÷ llama.cpp alone on every core (36.0 texts/s): 0.83× (target ≥ 0.8×: met)",
        "  query p99 under full ingest ÷ idle (16.0 / 10.0 ms): 1.60× (target ≤ 1.5×: not met)"]


def test_interleaved_rounds_state_the_median_rounds_ratio_and_pool_the_queries() -> None:
    # The machine ran at half speed in the second round: its floor and its service alike.
    rounds = [Round({"2 processes": 200.0, "1 process": 180.0}, 170.0, [10.0] * 10, [14.0] * 10),
              Round({"2 processes": 100.0, "1 process": 95.0}, 90.0, [20.0] * 10, [26.0] * 10),
              Round({"2 processes": 190.0, "1 process": 150.0}, 152.0, [11.0] * 10, [15.0] * 10)]
    raw_all, svc = summarise(rounds)
    assert svc["ingest ratio per round"] == [0.85, 0.9, 0.8]
    # the median round (0.85) gives the figures printed beside it, not the mean of the rates
    assert raw_all == {"2 processes": 200.0, "1 process": 180.0}
    assert svc["service texts/s"] == 170.0
    assert svc["queries during ingest"] == 30
    assert svc["query idle p99 ms"] == 20.0 and svc["query under ingest p99 ms"] == 26.0
    ingest, query = embedder_ratios(raw_all, svc)
    assert ingest.value == pytest.approx(0.85) and ingest.met
    assert ingest.raw["per round"] == [0.85, 0.9, 0.8]
    assert query.value == pytest.approx(1.3) and query.met
    assert embedder_lines(raw_all, svc)[0] == (
        "  ingest ÷ llama.cpp alone on every core (median of 3 rounds (0.85, 0.90, 0.80), its "
        "round's floor 200.0 texts/s): 0.85× (target ≥ 0.8×: met)")


def test_recall_against_its_floor_emits_what_it_prints() -> None:
    floor = Floor(10.0, 20.0, {1: (10.0, 20.0), 2: (12.0, 25.0)})
    lat = [15.0] * 99 + [90.0]
    p50, p99 = floor_ratios("recall at 20000 memories", lat, floor)
    assert (p50.name, p50.value, p50.target, p50.met) == (
        "recall at 20000 memories: p50 ÷ floor", 1.5, 2.0, True)
    assert (p99.name, p99.value, p99.target, p99.met) == (
        "recall at 20000 memories: p99 ÷ floor", 4.5, 4.0, False)
    assert p99.raw["p99 ms"] == 90.0 and p99.raw["floor p99 ms"] == 20.0 and p99.raw["n"] == 100
    assert p99.raw["floor per threads"]["2"] == {"p50 ms": 12.0, "p99 ms": 25.0}
    line = floor_lines("recall at 20000 memories", lat, floor)[1]
    assert line == ("  p50 15.0 ms = 1.50× (target ≤ 2.0×: met), p99 90.0 ms = 4.50× "
                    "(target ≤ 4.0×: not met)")
