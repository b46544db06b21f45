"""The reliability table itself: what `record` writes is what the report shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from . import report


def test_recorded_rows_make_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "FAST_RESULTS", tmp_path / "fast")
    monkeypatch.setenv("TR_CHAOS_FULL", "1")
    row = next(iter(report.ROWS))
    path = report.record(row, True, {"lost": 0, "kills": "indexer 3"}, note="n")
    assert path.parent == tmp_path
    report.record("a row the table does not know | yet", False, {"x": 1})
    text = report.document(report.load(tmp_path))
    lines = text.splitlines()
    mine = next(line for line in lines if line.startswith(f"| {row[:30]}"))
    assert "| yes;" in mine and "lost: 0; kills: indexer 3 — n" in mine
    assert any("a row the table does not know \\| yet" in line and "**NO**" in line
               for line in lines)
    assert sum("| not run |" in line for line in lines) == len(report.ROWS) - 1
    assert "machine:" in text and "make chaos" in text


def test_runs_append_and_name_their_commit_and_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setenv("TR_CHAOS_FULL", "1")
    clean = {"commit": "a" * 40, "dirty": False, "machine": "machine: test box"}
    for holds, prov in ((True, clean), (False, clean), (True, clean),
                        (True, {**clean, "dirty": True}), (True, {**clean, "commit": "b" * 40})):
        monkeypatch.setattr(report, "provenance", lambda prov=prov: prov)
        report.record("r", holds, {"n": 1})
    runs = report.load(tmp_path)["r"]
    assert all(r["commit"] == "a" * 40 and r["machine"] == "machine: test box"
               for r in runs[:3])
    assert len(runs) == 5  # appended, none overwritten
    on_main = {"a" * 40}.__contains__  # b… is a side branch's commit
    assert report.verdict(runs, on_main) == \
        "yes; held in 2 of 3 runs on main (+2 off main, dirty or of unknown commit)"
    assert "(" + str(runs[-1]["at"]) + ", bbbbbbb)" in report.table({"r": runs}, on_main)


def test_a_run_recorded_before_runs_named_their_commit_is_not_on_main(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text(json.dumps(
        {"row": "r", "holds": True, "figures": {}, "run": "full", "at": "2026-11-25T00:00:00"}))
    runs = report.load(tmp_path)["r"]
    assert report.verdict(runs, lambda _c: True) == \
        "yes; held in 0 of 0 runs on main (+1 off main, dirty or of unknown commit)"


def test_ci_sized_runs_are_recorded_when_asked_and_counted_apart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "FAST_RESULTS", tmp_path / "fast")
    monkeypatch.delenv("TR_CHAOS_FULL", raising=False)
    monkeypatch.setenv("TR_CHAOS_RECORD_CI", "1")
    clean = {"commit": "a" * 40, "dirty": False, "machine": "machine: test box"}
    monkeypatch.setattr(report, "provenance", lambda: clean)
    for holds in (True, False):
        assert report.record("r", holds, {}).parent == tmp_path
    monkeypatch.setenv("TR_CHAOS_FULL", "1")
    report.record("r", True, {})
    runs = report.load(tmp_path)["r"]
    assert [r["run"] for r in runs] == ["ci-sized", "ci-sized", "full"]
    assert report.verdict(runs, lambda _c: True) == \
        "yes; held in 1 of 1 runs on main; CI-sized: held in 1 of 2"
    monkeypatch.delenv("TR_CHAOS_FULL")
    report.record("r", False, {})  # a later CI-sized run is counted, not the headline
    runs = report.load(tmp_path)["r"]
    assert report.verdict(runs, lambda _c: True) == \
        "yes; held in 1 of 1 runs on main; CI-sized: held in 1 of 3"


def test_a_fast_run_never_overwrites_the_full_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    monkeypatch.setattr(report, "FAST_RESULTS", tmp_path / "fast")
    monkeypatch.delenv("TR_CHAOS_FULL", raising=False)
    monkeypatch.delenv("TR_CHAOS_RECORD_CI", raising=False)
    path = report.record("r", True, {})
    assert path.parent == tmp_path / "fast" and not list(tmp_path.glob("*.json*"))


class _Config:
    def __init__(self, chaos_full: bool, markexpr: str) -> None:
        self.options = {"chaos_full": chaos_full, "markexpr": markexpr}

    def getoption(self, name: str, default: object = None) -> object:
        return self.options.get(name, default)


def test_only_an_explicit_ask_makes_a_full_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """`-m "not chaos"` names the marker too: it must not turn on the full rows (which write the
    committed results)."""
    from .conftest import full_run

    monkeypatch.delenv("TR_CHAOS_FULL", raising=False)
    assert not full_run(_Config(False, "not chaos"))  # type: ignore[arg-type]
    assert not full_run(_Config(False, "chaos"))  # type: ignore[arg-type]
    assert full_run(_Config(True, ""))  # type: ignore[arg-type]
    monkeypatch.setenv("TR_CHAOS_FULL", "1")
    assert full_run(_Config(False, "not chaos"))  # type: ignore[arg-type]
