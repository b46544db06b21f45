"""In how many recorded runs each target held: `python -m bench.history` (or `python -m bench
report`) over bench/results/runs.jsonl.

A target is a ratio's name with its target (`recall at 20000 memories: p99 ÷ floor ≤ 4.0×`). For
each it prints "held in n of m runs", m being the runs that measured it: over every run recorded,
and over the runs on a clean tree at a commit that is HEAD or one of its ancestors (the code that
is here now, or its past), with the latest figures and the run they came from.

    python -m bench.history
    python -m bench.history --results /tmp/runs.jsonl
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.runs import ROOT, RUNS, commit_label, read_runs, target_text

#: Whether a commit is HEAD or one of its ancestors.
Ancestry = Callable[[str], bool]


def git_ancestry(root: Path = ROOT) -> Ancestry:
    """`git merge-base --is-ancestor`, asked once per commit."""
    seen: dict[str, bool] = {}

    def is_ancestor(commit: str) -> bool:
        if commit not in seen:
            try:
                seen[commit] = subprocess.run(
                    ["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=root,
                    capture_output=True).returncode == 0
            except OSError:
                seen[commit] = False
        return seen[commit]
    return is_ancestor


@dataclass
class Tally:
    """One target's record over the runs."""

    name: str
    target: str
    held: int = 0
    runs: int = 0
    held_here: int = 0  # clean runs on HEAD or an ancestor
    runs_here: int = 0
    latest: dict[str, Any] = field(default_factory=dict)
    latest_run: dict[str, Any] = field(default_factory=dict)


def tally(runs: Sequence[dict[str, Any]], is_ancestor: Ancestry) -> list[Tally]:
    """Per target, in the order first measured: n of m over all runs and over clean ancestors."""
    out: dict[tuple[str, str], Tally] = {}
    for run in runs:
        here = not run.get("dirty", True) and is_ancestor(str(run.get("commit", "")))
        for ratio in run.get("ratios", []):
            if "name" not in ratio or "value" not in ratio:
                continue
            t = out.setdefault((ratio["name"], target_text(ratio)),
                               Tally(ratio["name"], target_text(ratio)))
            met = bool(ratio.get("met"))
            t.runs += 1
            t.held += met
            if here:
                t.runs_here += 1
                t.held_here += met
            t.latest, t.latest_run = ratio, run
    return list(out.values())


#: Figures without a target that the report spreads over the runs: what the CPU per recall is,
#: and the least latency it allows, which bound the recall targets.
BOUNDING_FIGURES = (": CPU per recall", "the CPU allows")


@dataclass
class Spread:
    """One figure's values over the clean runs of HEAD or its ancestors."""

    name: str
    unit: str
    values: list[float] = field(default_factory=list)
    latest_run: dict[str, Any] = field(default_factory=dict)


def spreads(runs: Sequence[dict[str, Any]], is_ancestor: Ancestry) -> list[Spread]:
    """The `BOUNDING_FIGURES` of the clean runs on HEAD or its ancestors, in the order first
    recorded."""
    out: dict[str, Spread] = {}
    for run in runs:
        if run.get("dirty", True) or not is_ancestor(str(run.get("commit", ""))):
            continue
        for fig in run.get("figures", []):
            name = str(fig.get("name", ""))
            if "value" not in fig or not any(name.endswith(end) for end in BOUNDING_FIGURES):
                continue
            sp = out.setdefault(name, Spread(name, str(fig.get("unit", ""))))
            sp.values.append(float(fig["value"]))
            sp.latest_run = run
    return list(out.values())


def report(runs: Sequence[dict[str, Any]], is_ancestor: Ancestry) -> str:
    """The text `python -m bench.history` prints."""
    if not runs:
        return "no runs recorded yet (make bench appends one per run)"
    lines = [f"{len(runs)} run(s) recorded, {runs[0]['time']} to {runs[-1]['time']}; "
             "'held in n of m': m runs measured the target, n met it", ""]
    for t in tally(runs, is_ancestor):
        r, run = t.latest, t.latest_run
        lines += [f"{t.name} (target {t.target})",
                  f"  held in {t.held} of {t.runs} runs; in {t.held_here} of {t.runs_here} "
                  "on clean commits that are HEAD or its ancestors",
                  f"  latest {r['value']:.2f}× ({'met' if r.get('met') else 'not met'}), "
                  f"{run['time']}, commit {commit_label(run)}, load before "
                  f"{' '.join(f'{x:.2f}' for x in run.get('load_before', []))}"
                  + (f", args {' '.join(run['args'])}" if run.get("args") else ""),
                  f"    {run.get('machine', 'machine unknown')}",
                  f"    from {_raw(r.get('raw', {}))}", ""]
    bounds = spreads(runs, is_ancestor)
    if bounds:
        lines.append("What bounds the recall targets (no target of their own), over the clean runs "
                     "on HEAD or its ancestors:")
        for sp in bounds:
            unit = "×" if sp.unit == "×" else f" {sp.unit}"
            lines.append(f"  {sp.name}: {min(sp.values):.2f}–{max(sp.values):.2f}{unit} in "
                         f"{len(sp.values)} run(s); latest {sp.values[-1]:.2f}{unit}, commit "
                         f"{commit_label(sp.latest_run)}")
        lines.append("")
    failed = [f"{run['time']} {', '.join(run['failed'])}" for run in runs if run.get("failed")]
    if failed:
        lines.append("runs with failed benches: " + "; ".join(failed))
    return "\n".join(lines).rstrip()


def _raw(raw: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return f"{v:.1f}" if isinstance(v, float) else str(v)
    return ", ".join(f"{k} {fmt(v)}" for k, v in raw.items() if not isinstance(v, dict)) or "-"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", type=Path, default=RUNS,
                   help="the runs file (default %(default)s)")
    args = p.parse_args(argv)
    print(report(read_runs(args.results), git_ancestry()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
