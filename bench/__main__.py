"""`make bench`: every benchmark in turn, each printing its own figures, then one summary table of
every ratio the run measured, appended to bench/results/runs.jsonl (`bench/runs.py`).

    python -m bench                        # embedder, query path, indexer (10k), recall (20k, 100k)
    python -m bench recall-1m              # recall at 1M memories: run only when named
    python -m bench recall -- --n 1000000  # arguments after -- go to each bench named
    python -m bench embedder --results /tmp/runs.jsonl -- --n 40 --raw-n 16
    python -m bench report                 # in how many runs each target held (bench/history.py)

Each bench prints its figures as ratios to the hardware measured in the same run (llama.cpp
alone), with the targets beside them, and hands the same to this driver through a file named in
$TR_BENCH_RESULTS (`bench/ratios.py`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import ratios, runs

HERE = Path(__file__).parent
BENCHES: dict[str, list[str]] = {
    "embedder": ["-m", "bench.embedder_bench"],
    "query-path": ["-m", "bench.query_path"],
    "indexer": [str(HERE / "indexer_bench.py"), "--n", "10000"],
    "recall": ["-m", "bench.recall_bench", "--n", "20000", "--queries", "300"],
    "recall-100k": ["-m", "bench.recall_bench", "--n", "100000", "--queries", "300"],
    "recall-1m": ["-m", "bench.recall_bench", "--n", "1000000", "--queries", "300"],
}
#: Run only when named: seeding the 1M row takes far longer than every other bench together
#: (docs/perf/2026-11-30-recall-1m-and-cpu-bound.md).
ON_REQUEST = frozenset({"recall-1m"})
DEFAULT = [name for name in BENCHES if name not in ON_REQUEST]
_ABOUT = {
    "embedder": "llama.cpp alone vs the embedder through NATS; query p99 under ingest ÷ idle",
    "query-path": "a question embedded in the recall API's process vs the embedder's RPC",
    "indexer": "events/s into Markdown + Postgres + Zvec, search per tier (10k events)",
    "recall": "recall over HTTP at 20k memories ÷ its floor (llama.cpp alone)",
    "recall-100k": "the same at 100k memories",
    "recall-1m": "the same at 1M memories (only when named: a long seeding)",
}
#: Runs one bench's command with its environment; returns its exit status.
Runner = Callable[[list[str], dict[str, str]], int]


@dataclass(frozen=True)
class Plan:
    names: list[str]
    extra: list[str]
    results: Path | None  # None: do not record the run
    report: bool = False


def _parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {name:12s} {_ABOUT[name]}" for name in BENCHES)
    p = argparse.ArgumentParser(
        prog="python -m bench", formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="python -m bench [-h] [--results PATH | --no-record] [names ...] [-- extra args]",
        description="Run the benchmarks in turn (all when none is named), print one summary "
                    "table of every ratio to the hardware, and append the run to "
                    f"{runs.RUNS.relative_to(runs.ROOT)}.",
        epilog=f"benches:\n{listing}\n  {'report':12s} no bench: in how many recorded runs each "
               "target held (python -m bench.history)\n\narguments after -- go to each bench "
               "named (and to python -m bench.history for report).")
    p.add_argument("names", nargs="*", metavar="names", help="benches to run, in this order")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--results", type=Path, default=runs.RUNS, metavar="PATH",
                       help="append the run to this file (default "
                            f"{runs.RUNS.relative_to(runs.ROOT)}; report reads it)")
    where.add_argument("--no-record", action="store_true", help="print the summary only")
    return p


def parse(argv: Sequence[str]) -> Plan:
    """What to run; exits with argparse's message on --help, an unknown name or option."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    own, extra = argv[:cut], argv[cut + 1:]
    p = _parser()
    args = p.parse_args(own)
    if args.names == ["report"]:
        return Plan([], extra, args.results, report=True)
    unknown = [n for n in args.names if n not in BENCHES]
    if unknown:
        p.error(f"unknown bench {', '.join(map(repr, unknown))} (choose from "
                f"{', '.join(BENCHES)}, or report alone)")
    if extra and not args.names:
        p.error("arguments after -- need the benches they are for named before it")
    return Plan(args.names or list(DEFAULT), extra, None if args.no_record else args.results)


def _subprocess_runner(cmd: list[str], env: dict[str, str]) -> int:
    return subprocess.run(cmd, cwd=HERE.parent, env=env).returncode


def run(plan: Plan, runner: Runner = _subprocess_runner,
        machine: Callable[[], str] | None = None) -> int:
    """Each bench in turn, then the summary; the run is appended to `plan.results`."""
    from bench.machine import describe

    commit, dirty = runs.git_state()
    load_before, t0 = runs.load(), time.perf_counter()
    failed: list[str] = []
    records: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="tr-bench-results-") as tmp:
        for name in plan.names:
            print(f"\n=== bench: {name} ===", flush=True)
            out = Path(tmp) / f"{name}.jsonl"
            env = {**os.environ, ratios.ENV: str(out)}
            if runner([sys.executable, *BENCHES[name], *plan.extra], env) != 0:
                failed.append(name)
            records += [{"bench": name, **r} for r in ratios.read(out)]
    record = runs.make_run(commit=commit, dirty=dirty, machine=(machine or describe)(),
                           load_before=load_before, load_after=runs.load(), benches=plan.names,
                           failed=failed, args=plan.extra, records=records,
                           seconds=time.perf_counter() - t0)
    if plan.results is not None:
        runs.append(plan.results, record)
    print("\n" + runs.summary(record, plan.results), flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: Sequence[str]) -> int:
    plan = parse(argv)
    if plan.report:
        from bench import history

        return history.main(["--results", str(plan.results), *plan.extra])
    return run(plan)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
