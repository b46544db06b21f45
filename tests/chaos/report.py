"""The reliability table: every chaos row's outcome, collected into docs/reliability.md.

A row module calls `record(row, holds, figures, note)`; the row name is the table's first-column
text (one of `ROWS`). A full run (`make chaos`: `--chaos-full`, which sets
``TR_CHAOS_FULL=1``) writes `tests/chaos/results/<slug>.json`; the fast subset that runs inside
`make test` writes `tests/chaos/results/fast/` instead, so it never overwrites the committed
figures of a full run.

`python -m tests.chaos.report` prints the table (fault or input | what must hold | holds? |
figures) and writes docs/reliability.md with the date, the machine and the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
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
    "a corpus of prompt injections (closing tags, forged blocks, \"ignore previous "
    "instructions\", unicode look-alikes) through API, MCP and the OpenClaw plugin with shared "
    "namespaces":
        "0 forged or closed `<system_memory>` blocks",
    "the API bound off loopback without a token; with a wrong token":
        "refuses to start / 401",
    "sustained load: recall at 50 req/s while ingesting 200 events/s for 10 minutes":
        "p99 within the budget, no growth in memory or consumer lag",
}

COMMANDS = ("make chaos    # the full rows (pytest --chaos-full -m chaos tests/chaos), then this table",
            "python -m tests.chaos.report    # the table again from tests/chaos/results/")


def full_run() -> bool:
    """`make chaos` (`pytest --chaos-full`) is a full run; anything else is the fast subset."""
    return os.environ.get("TR_CHAOS_FULL") == "1"


def slug(row: str) -> str:
    """A file name for a row: its first words, lower-case, dashes."""
    words = re.findall(r"[a-z0-9]+", row.lower())
    return "-".join(words)[:60].strip("-") or "row"


def record(row: str, holds: bool, figures: dict[str, object], note: str = "") -> Path:
    """Write one row's outcome (figures: name -> number or short text) and return the file."""
    out_dir = RESULTS if full_run() else FAST_RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{slug(row)}.json"
    payload = {"row": row, "holds": bool(holds), "figures": figures, "note": note,
               "run": "full" if full_run() else "fast",
               "at": datetime.now(UTC).isoformat(timespec="seconds")}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def load(results_dir: Path = RESULTS) -> dict[str, dict[str, object]]:
    """Every results file in `results_dir`, by row name."""
    found: dict[str, dict[str, object]] = {}
    for path in sorted(results_dir.glob("*.json")):
        data = json.loads(path.read_text())
        found[str(data["row"])] = data
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _is_series(value: object) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], list)


def _figures(figures: dict[str, object]) -> str:
    """The figures as one line; a series (a list of rows, e.g. latency over time) stays in
    the row's results file."""
    return "; ".join(f"{k}: {v}" for k, v in figures.items() if not _is_series(v))


def table(results: dict[str, dict[str, object]]) -> str:
    """The markdown table: every known row (those without results say "not run"), then any row
    recorded under a name `ROWS` does not know."""
    lines = ["| fault or input | what must hold | holds? | figures |", "|---|---|---|---|"]
    names = list(ROWS) + [r for r in results if r not in ROWS]
    for name in names:
        res = results.get(name)
        if res is None:
            verdict, figs = "not run", ""
        else:
            verdict = "yes" if res["holds"] else "**NO**"
            figs = _figures(res["figures"])  # type: ignore[arg-type]
            if res.get("note"):
                figs += f" — {res['note']}"
            if res.get("run") != "full":
                verdict += f" ({res.get('run')} run)"
        lines.append(f"| {_cell(name)} | {_cell(ROWS.get(name, '—'))} | {verdict} | "
                     f"{_cell(figs)} |")
    return "\n".join(lines)


def _machine() -> str:
    sys.path.insert(0, str(REPO))
    try:
        from bench.machine import describe

        return describe()
    except Exception as exc:  # noqa: BLE001 - the table matters more than the machine line
        return f"machine: unknown ({exc})"


def document(results: dict[str, dict[str, object]], when: datetime | None = None) -> str:
    when = when or datetime.now(UTC)
    recorded = sorted(str(r.get("at", "")) for r in results.values())
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
        "`make test` (its results go to `tests/chaos/results/fast/`, not here).",
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
    failed = [r for r, res in results.items() if not res["holds"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
