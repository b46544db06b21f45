"""`python -m bench`: its arguments, the benches run with a results file each, the summary table
and the run appended (`bench/__main__.py`, `bench/runs.py`). The benches are fakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import ratios, runs
from bench.__main__ import BENCHES, DEFAULT, Plan, parse, run
from bench.ratios import Figure, Ratio


def _exit_code(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as stop:
        parse(argv)
    return int(stop.value.code or 0)


def test_help_lists_the_benches_and_runs_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in [*BENCHES, "report"])


@pytest.mark.parametrize("argv", [["nope"], ["--bogus"], ["recall", "--n", "5"], ["--", "--n", "5"],
                                  ["report", "recall"], ["--no-record", "--results", "x"]])
def test_an_unknown_name_or_option_is_an_error(argv: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(argv) == 2
    assert "error" in capsys.readouterr().err


def test_names_extra_arguments_and_where_the_run_goes() -> None:
    assert parse([]) == Plan(DEFAULT, [], runs.RUNS)
    assert "recall-1m" in BENCHES and "recall-1m" not in DEFAULT  # an hour: only when named
    assert parse(["recall-1m"]).names == ["recall-1m"]
    assert parse(["recall", "embedder", "--results", "/tmp/r.jsonl", "--", "--n", "40"]) == Plan(
        ["recall", "embedder"], ["--n", "40"], Path("/tmp/r.jsonl"))
    assert parse(["--no-record", "indexer"]) == Plan(["indexer"], [], None)
    assert parse(["report", "--results", "/tmp/r.jsonl"]).report


class FakeBenches:
    """Each bench writes the records it is given to the file the driver names, and exits."""

    def __init__(self, emits: dict[str, list[Ratio | Figure]], fail: set[str]) -> None:
        self.emits, self.fail = emits, fail
        self.cmds: list[list[str]] = []

    def __call__(self, cmd: list[str], env: dict[str, str]) -> int:
        self.cmds.append(cmd)
        name = next(n for n, args in BENCHES.items() if cmd[1:1 + len(args)] == args)
        with open(env[ratios.ENV], "a", encoding="utf-8") as f:
            for r in self.emits.get(name, []):
                f.write(json.dumps(r.as_dict()) + "\n")
        return 1 if name in self.fail else 0


def test_a_run_collects_every_ratio_prints_one_summary_and_appends_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results" / "runs.jsonl"
    benches = FakeBenches({
        "embedder": [Ratio("embedder: ingest ÷ llama.cpp alone on every core", 0.9, 0.8, ">=",
                           {"service texts/s": 36.0})],
        "recall": [Ratio("recall at 20000 memories: p99 ÷ floor", 4.5, 4.0, "<="),
                   Figure("recall at 20000 memories: stage embed mean", 7.25, "ms")],
    }, fail={"indexer"})
    plan = Plan(["embedder", "indexer", "recall"], ["--n", "40"], out)
    assert run(plan, benches, machine=lambda: "machine: test CPU, 2 cpus") == 1
    assert [c[-2:] for c in benches.cmds] == [["--n", "40"]] * 3

    text = capsys.readouterr().out
    summary = text[text.index("=== summary"):]
    assert "machine: test CPU, 2 cpus" in summary and "load average before" in summary
    assert "0.90×  ≥ 0.8×  met" in summary and "4.50×  ≤ 4.0×  NOT MET" in summary
    assert "targets met: 1 of 2" in summary and "7.25 ms" in summary
    assert "failed: indexer" in summary and str(out) in summary

    (line,) = out.read_text().splitlines()
    record = json.loads(line)
    assert record["commit"] and isinstance(record["dirty"], bool)
    assert record["machine"] == "machine: test CPU, 2 cpus"
    assert len(record["load_before"]) == len(record["load_after"]) == 3
    assert record["benches"] == ["embedder", "indexer", "recall"]
    assert record["failed"] == ["indexer"] and record["args"] == ["--n", "40"]
    assert [(r["bench"], r["name"], r["met"]) for r in record["ratios"]] == [
        ("embedder", "embedder: ingest ÷ llama.cpp alone on every core", True),
        ("recall", "recall at 20000 memories: p99 ÷ floor", False)]
    assert record["ratios"][0]["raw"] == {"service texts/s": 36.0}
    assert [f["name"] for f in record["figures"]] == ["recall at 20000 memories: stage embed mean"]

    assert run(Plan(["embedder"], [], out), FakeBenches({}, set()), machine=lambda: "m") == 0
    first, second = out.read_text().splitlines()
    assert first == line  # appended, never rewritten
    assert json.loads(second)["ratios"] == []


def test_without_recording_nothing_is_written(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert run(Plan(["embedder"], [], None), FakeBenches({}, set()), machine=lambda: "m") == 0
    assert "no ratios were reported" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_reading_runs_back_skips_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    good = runs.make_run(commit="abc", dirty=False, machine="m", load_before=[1, 1, 1],
                         load_after=[2, 2, 2], benches=["recall"], failed=[], args=[], records=[])
    runs.append(path, good)
    with path.open("a") as f:
        f.write('{"commit": "torn\n[]\n')
    runs.append(path, {**good, "commit": "def"})
    assert [r["commit"] for r in runs.read_runs(path)] == ["abc", "def"]
    assert runs.read_runs(tmp_path / "none.jsonl") == []


def test_the_tree_s_state_names_a_commit(tmp_path: Path) -> None:
    commit, dirty = runs.git_state()
    assert len(commit) == 40 and isinstance(dirty, bool)
    assert runs.git_state(tmp_path) == ("unknown", True)  # not a repository: never called clean
