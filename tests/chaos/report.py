"""The reliability table: every chaos row's outcome, collected into docs/reliability.md.

A row module calls `record(row, holds, figures, note)`; the row name is the table's first-column
text (one of `ROWS`). Each run is appended, with its commit, a dirty flag, the machine and the
time, to `tests/chaos/results/<slug>.jsonl` in a full run (`make chaos`: `--chaos-full`, which
sets ``TR_CHAOS_FULL=1``); the fast subset that runs inside `make test` appends to
`tests/chaos/results/fast/` instead, so it never mixes with the committed runs.

`python -m tests.chaos.report` prints the table (fault or input | what must hold | holds?, with
"held in n of m runs on main" | the latest run's figures, its time and commit) and writes
docs/reliability.md with the date, the machine and the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FAST_RESULTS = RESULTS / "fast"
REPO = HERE.parents[1]
DOC = REPO / "docs" / "reliability.md"

#: fault or input -> what must hold, in the table's order.
ROWS: dict[str, str] = {
    "kill -9 of each service (watchers, embedder, indexer, recall-api) at random moments while "
    "20k events stream in, several times each":
        "every accepted event recallable afterwards, none twice (count by id in Postgres, Zvec "
        "and Markdown)",
    "nats-server killed and restarted mid-stream; Postgres stopped 60 s":
        "full catch-up, nothing lost, recall degrades and recovers",
    "the state disk full (a size-limited tmpfs as `TOTALRECALL_HOME`)":
        "clear errors, no corrupt files, recovery once space is back",
    "schemathesis over `/openapi.json` (PyPI `schemathesis`)":
        "0 responses 5xx, every 4xx names the reason",
    "malformed and oversized NATS messages on every subject":
        "dead-lettered with a reason, pipeline keeps flowing",
    "a corpus of secrets (keys, tokens, passwords, connection strings) through the API, each "
    "watcher and the plugin":
        "0 found anywhere on disk afterwards (grep every file under the home, Postgres dump, "
        "Zvec, logs, spool)",
    "a generated corpus of secrets: thousands of samples of each kind the scrubber claims (cloud, "
    "forge, chat and payment keys, JWTs, private key blocks, passwords in URLs, headers, "
    "assignments and command lines, high-entropy keys) in log lines, shell commands, config files, "
    "JSON and prose, from a seeded RNG, through the API's ingest":
        "0 survive the scrubber; 0 found in Postgres (pg_dump), the Zvec payloads or the Markdown "
        "logs; false positives on ordinary text recorded",
    "a corpus of prompt injections (closing tags, forged blocks, \"ignore previous "
    "instructions\", unicode look-alikes) through API, MCP and the OpenClaw plugin with shared "
    "namespaces":
        "0 forged or closed `<system_memory>` blocks",
    "the new write paths (supersede, the action ledger, session end, patterns refresh, export) "
    "under SQL, path and prompt injection, wrong types and huge values, fuzzed as a state machine "
    "(hypothesis) against the live stack":
        "0 responses 5xx, every 4xx names the field; nothing stored that no 2xx answered, nor "
        "outside the namespace the request named (a victim namespace unchanged); every answered "
        "write stored; the ledger's chain whole",
    "the API bound off loopback without a token; with a wrong token":
        "refuses to start / 401",
    "sustained load, query-embedding caches on: recall at 50 req/s (600 distinct questions) "
    "while ingesting 200 events/s for 10 minutes":
        "recall p99 within the design's 85 ms (each stage's mean within its share: query "
        "embedding 50, hot-tier search 20, BM25 10, merge and rerank 5 ms); no errors, no growth "
        "in memory or consumer lag",
    "sustained load, query-embedding caches off (every question embedded): recall at 50 req/s "
    "(600 distinct questions) while ingesting 200 events/s for 10 minutes":
        "the same",
    "a fleet (`make fleet-smoke`): 3-node NATS cluster with R3 streams, 3 hosts with their own "
    "credentials streaming 10,000 events, 2 embedders, 2 indexer partitions, 2 recall APIs; one "
    "NATS node, one embedder and one indexer killed -9 mid-stream":
        "every event stored exactly once (Postgres, its partition's Zvec and Markdown), none "
        "dead-lettered; recall says which partition is missing meanwhile, never a 5xx; both "
        "APIs recall each host's events by host; a host cannot publish as another",
}

COMMANDS = ("make chaos    # the full rows (pytest --chaos-full -m chaos tests/chaos), then this table",
            "TR_CHAOS_RECORD_CI=1 pytest -m fast tests/chaos    # the CI-sized variants (those "
            "make test runs), recorded here as CI-sized runs",
            "make fleet-smoke    # the fleet row (pytest tests/fleet), then this table",
            "python -m tests.chaos.report    # the table again from tests/chaos/results/")


#: Each row's CI-sized variant (the `fast` test `make test` runs), by the row's first words.
CI_SIZED: dict[str, str] = {
    "kill -9": "1,000 events at 100/s, each service killed once, a recall sample of 20 (the full "
               "row: 20,000 at 150/s, each killed 3 times, 100)",
    "nats-server killed": "600 events at 40/s, Postgres stopped 10 s (6,000 at 60/s, 60 s)",
    "the state disk full": "600 events at 30/s, the disk full 10 s (4,000 at 40/s, 60 s); as "
                           "root only, like the full row",
    "schemathesis": "3 examples per operation and mode (100)",
    "malformed": "one round of the malformed messages (3 rounds, more payload kinds)",
    "a corpus of secrets": "12 of the fixed corpus's 32 secrets through every channel",
    "a generated corpus": "500 samples of each kind through the scrubber and a MemoryEvent, and "
                          "the false-positive rate, no stack (100 of each through the stack's "
                          "ingest and the stores, 3,000 through the scrubber)",
    "a corpus of prompt injections": "6 of the 20 corpus items",
    "the new write paths": "5 state-machine runs of 15 steps (40 of 25)",
    "the API bound off loopback": "the whole row (a minute)",
    "sustained load": "30 s at 10 recalls/s (300 distinct questions, caches off) and 50 events/s: "
                      "every behaviour check (no errors, every recall answered, no growth in "
                      "memory or lag, drained, caches off) and p99 under a loose 2 s per unit of load "
                      "average per CPU; the "
                      "design's budgets are recorded, asserted by the full rows only (a shared "
                      "2-core machine misses them for reasons of its own)",
    "a fleet": "the whole row (`tests/fleet`, which `make test` runs too)",
}


def full_run() -> bool:
    """`make chaos` (`pytest --chaos-full`) is a full run; anything else is the fast subset."""
    return os.environ.get("TR_CHAOS_FULL") == "1"


def ci_recorded() -> bool:
    """A run of the fast subset (the CI-sized variants `make test` runs) asked to record into
    the committed results (``TR_CHAOS_RECORD_CI=1``), as "ci-sized" runs."""
    return os.environ.get("TR_CHAOS_RECORD_CI") == "1"


def run_kind() -> str:
    return "full" if full_run() else "ci-sized" if ci_recorded() else "fast"


def slug(row: str) -> str:
    """A file name for a row: its first words, lower-case, dashes."""
    words = re.findall(r"[a-z0-9]+", row.lower())
    return "-".join(words)[:60].strip("-") or "row"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def provenance() -> dict[str, object]:
    """What a run's figures are of: the commit, whether the tree had uncommitted changes
    (results excepted), and the machine."""
    status = _git("status", "--porcelain", "--", ".", ":(exclude)tests/chaos/results")
    return {"commit": _git("rev-parse", "HEAD"), "dirty": bool(status) if status is not None
            else None, "machine": _machine()}


def record(row: str, holds: bool, figures: dict[str, object], note: str = "") -> Path:
    """Append one run of a row (figures: name -> number or short text, with the commit, a dirty
    flag, the machine and the time) to its file, and return the file. Runs append: a row that
    held in 2 of 3 runs says so."""
    out_dir = FAST_RESULTS if run_kind() == "fast" else RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{slug(row)}.jsonl"
    payload = {"row": row, "holds": bool(holds), "figures": figures, "note": note,
               "run": run_kind(),
               "at": datetime.now(UTC).isoformat(timespec="seconds"), **provenance()}
    with open(path, "a") as fh:
        fh.write(json.dumps(payload, default=str) + "\n")
    return path


Run = dict[str, object]


def load(results_dir: Path = RESULTS) -> dict[str, list[Run]]:
    """Every recorded run in `results_dir`, by row name, oldest first (`<slug>.jsonl`, one run a
    line; a `<slug>.json` is a single run recorded before runs named their commit)."""
    found: dict[str, list[Run]] = {}
    for path in sorted(results_dir.glob("*.json")):
        data = json.loads(path.read_text())
        found.setdefault(str(data["row"]), []).append(data)
    for path in sorted(results_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                data = json.loads(line)
                found.setdefault(str(data["row"]), []).append(data)
    for runs in found.values():
        runs.sort(key=lambda r: str(r.get("at", "")))
    return found


def on_main(run: Run, is_ancestor: Callable[[str], bool] | None = None) -> bool:
    """A run of a clean tree at a commit main contains (HEAD's history)."""
    commit = run.get("commit")
    if not commit or run.get("dirty") is not False:
        return False
    check = is_ancestor or (lambda c: _git("merge-base", "--is-ancestor", c, "HEAD") is not None)
    return check(str(commit))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _is_series(value: object) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], list)


def _figures(figures: dict[str, object]) -> str:
    """The figures as one line; a series (a list of rows, e.g. latency over time) stays in
    the row's results file."""
    return "; ".join(f"{k}: {v}" for k, v in figures.items() if not _is_series(v))


def headline(runs: list[Run]) -> Run:
    """The run a row's verdict and figures are of: the latest full one (a CI-sized run after it
    is counted, not shown), else the latest."""
    return next((r for r in reversed(runs) if r.get("run", "full") == "full"), runs[-1])


def verdict(runs: list[Run], is_ancestor: Callable[[str], bool] | None = None) -> str:
    """"yes"/"**NO**" by the latest full run (else the latest), and how many of the runs on main
    held."""
    latest = headline(runs)
    word = "yes" if latest["holds"] else "**NO**"
    if latest.get("run") != "full":
        word += f" ({latest.get('run')} run)"
    main = [r for r in runs if on_main(r, is_ancestor)]
    full = [r for r in main if r.get("run", "full") != "ci-sized"]
    ci = [r for r in main if r.get("run") == "ci-sized"]
    counted = f"held in {sum(1 for r in full if r['holds'])} of {len(full)} runs on main"
    if ci:
        counted += f"; CI-sized: held in {sum(1 for r in ci if r['holds'])} of {len(ci)}"
    other = len(runs) - len(main)
    if other:
        counted += f" (+{other} off main, dirty or of unknown commit)"
    return f"{word}; {counted}"


def table(results: dict[str, list[Run]],
          is_ancestor: Callable[[str], bool] | None = None) -> str:
    """The markdown table: every known row (those without results say "not run"), then any row
    recorded under a name `ROWS` does not know. Figures are the latest run's, with its commit."""
    lines = ["| fault or input | what must hold | holds? | latest figures |", "|---|---|---|---|"]
    names = list(ROWS) + [r for r in results if r not in ROWS]
    for name in names:
        runs = results.get(name)
        if not runs:
            word, figs = "not run", ""
        else:
            latest = headline(runs)
            word = verdict(runs, is_ancestor)
            figs = _figures(latest["figures"])  # type: ignore[arg-type]
            if latest.get("note"):
                figs += f" — {latest['note']}"
            commit = str(latest.get("commit") or "")[:7] or "commit not recorded"
            dirty = " + uncommitted changes" if latest.get("dirty") else ""
            figs = f"({latest.get('at')}, {commit}{dirty}) {figs}"
        lines.append(f"| {_cell(name)} | {_cell(ROWS.get(name, '—'))} | {word} | "
                     f"{_cell(figs)} |")
    return "\n".join(lines)


def _machine() -> str:
    sys.path.insert(0, str(REPO))
    try:
        from bench.machine import describe

        return describe()
    except Exception as exc:  # noqa: BLE001 - the table matters more than the machine line
        return f"machine: unknown ({exc})"


def document(results: dict[str, list[Run]], when: datetime | None = None) -> str:
    when = when or datetime.now(UTC)
    recorded = sorted(str(r.get("at", "")) for runs in results.values() for r in runs)
    span = f"{recorded[0]} … {recorded[-1]}" if recorded else "no results"
    return "\n".join([
        "# Reliability: the whole stack under faults and hostile input",
        "",
        f"Generated {when:%Y-%m-%d %H:%M} UTC by `python -m tests.chaos.report` from "
        f"`tests/chaos/results/` (rows recorded {span}).",
        "",
        _machine(),
        "",
        "Each row runs against the stack as `make run` starts it (`totalrecall run` on free "
        "ports, its own `TOTALRECALL_HOME`); the code is `tests/chaos/`, and how each fault is "
        "made is the docstring of its row's module there. A fast subset of the rows runs in "
        "`make test` (its results go to `tests/chaos/results/fast/`, not here; a run of it "
        "recorded with `TR_CHAOS_RECORD_CI=1` counts here as CI-sized).",
        "",
        "The full rows do not fit CI: `make test` takes about 18 minutes on this 2-core "
        "machine and the compose smoke 3, and the full rows add more than the 49 minutes left "
        "of a 70-minute budget (the kill row alone streams 20,000 events for 2 minutes and drained "
        "in 14 more on a quiet machine; the two sustained-load rows are 10 minutes of load each, "
        "plus a stack start and a drain; schemathesis sends about 3,800 requests). So `.ci/run` "
        "runs `make test`, in which every row has a CI-sized variant with the full row's "
        "assertions on smaller counts, and `make chaos` runs the full rows:",
        "",
        *[f"- {name}: {what}" for name, what in CI_SIZED.items()],
        "",
        "```sh", *COMMANDS, "```",
        "",
        table(results),
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true",
                    help="fill rows without a full result from the fast subset's results")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    results = load(RESULTS)
    if args.fast:
        results = {**load(FAST_RESULTS), **results}
    text = document(results)
    print(table(results))
    if not args.no_write:
        DOC.write_text(text)
        print(f"\nwritten to {DOC.relative_to(REPO)}", file=sys.stderr)
    failed = [r for r, runs in results.items() if not headline(runs)["holds"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
