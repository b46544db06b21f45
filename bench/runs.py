"""One `python -m bench` run as a record: when, which commit (dirty or not), which machine, the load
around it, every ratio and figure its benches emitted (`bench/ratios.py`), and which benches
failed. Runs are appended to `bench/results/runs.jsonl`, one JSON object a line, never rewritten:
`python -m bench.history` counts in how many of them each target held.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "bench" / "results" / "runs.jsonl"
#: Not what a bench measures: the runs appended here would otherwise make every later run dirty.
_NOT_CODE = ":(exclude)bench/results"


def git_state(root: Path = ROOT, not_code: Sequence[str] = (_NOT_CODE,)) -> tuple[str, bool]:
    """HEAD's commit and whether the working tree differs from it (`not_code` aside: by default
    bench/results/)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        return git("rev-parse", "HEAD"), bool(git("status", "--porcelain", "--", ".", *not_code))
    except (OSError, subprocess.CalledProcessError):
        return "unknown", True


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages (what else was running)."""
    return [round(x, 2) for x in os.getloadavg()]


def make_run(*, commit: str, dirty: bool, machine: str, load_before: Sequence[float],
             load_after: Sequence[float], benches: Sequence[str], failed: Sequence[str],
             args: Sequence[str], records: Sequence[dict[str, Any]],
             started: datetime | None = None, seconds: float | None = None) -> dict[str, Any]:
    """The record of one run; `records` are the benches' ratios and figures, each with its bench."""
    return {
        "time": (started or datetime.now(UTC)).isoformat(timespec="seconds"),
        "seconds": None if seconds is None else round(seconds, 1),
        "commit": commit, "dirty": dirty, "machine": machine,
        "load_before": list(load_before), "load_after": list(load_after),
        "benches": list(benches), "failed": list(failed), "args": list(args),
        "ratios": [r for r in records if r.get("kind") == "ratio"],
        "figures": [r for r in records if r.get("kind") == "figure"],
    }


def append(path: Path, run: dict[str, Any]) -> None:
    """Add `run` as the last line of `path` (created with its folder when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(run, ensure_ascii=False) + "\n")


def read_runs(path: Path) -> list[dict[str, Any]]:
    """Every run recorded in `path`, oldest first (a torn or foreign line is skipped)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    runs = []
    for line in lines:
        try:
            run = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(run, dict) and "commit" in run and isinstance(run.get("ratios"), list):
            runs.append(run)
    return runs


def commit_label(run: dict[str, Any]) -> str:
    """e.g. `e275385 (dirty)`."""
    return str(run.get("commit", "unknown"))[:9] + (" (dirty)" if run.get("dirty") else "")


def target_text(ratio: dict[str, Any]) -> str:
    """e.g. `≤ 1.5×`."""
    return f"{'≤' if ratio.get('comparison') == '<=' else '≥'} {ratio.get('target')}×"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def summary(run: dict[str, Any], recorded: Path | None = None) -> str:
    """The one table `python -m bench` ends with: every ratio of the run beside its target."""
    lines = [f"=== summary: {len(run['benches'])} bench(es), {len(run['ratios'])} ratio(s) "
             "to the hardware, same run ===",
             f"commit {commit_label(run)}; {run['machine']}",
             "load average before {} / after {}".format(
                 " ".join(f"{x:.2f}" for x in run["load_before"]),
                 " ".join(f"{x:.2f}" for x in run["load_after"]))]
    if run["ratios"]:
        rows = [["bench", "ratio", "value", "target", "met"]]
        rows += [[str(r.get("bench", "")), str(r["name"]), f"{r['value']:.2f}×", target_text(r),
                  "met" if r.get("met") else "NOT MET"] for r in run["ratios"]]
        lines += _table(rows)
        held = sum(1 for r in run["ratios"] if r.get("met"))
        lines.append(f"targets met: {held} of {len(run['ratios'])}")
    else:
        lines.append("no ratios were reported")
    if run["figures"]:
        lines.append("figures without a target:")
        lines += _table([[str(f.get("bench", "")), str(f["name"]),
                          f"{f['value']:.2f} {f.get('unit', '')}".rstrip()]
                         for f in run["figures"]])
    if run["failed"]:
        lines.append(f"failed: {', '.join(run['failed'])}")
    if recorded is not None:
        lines.append(f"run appended to {recorded}")
    return "\n".join(lines)
