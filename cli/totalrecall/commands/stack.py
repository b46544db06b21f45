"""`totalrecall run | status`: the local stack and its health (the work: `supervisor`, `status`),
and the table of the verbs that parse their own options (`rebuild`, `model`, `import`, `ledger`:
`commands.rebuild`, `commands.model`, …)."""

from __future__ import annotations

import argparse
import importlib

from ._common import add_json_flag, emit

STATUS_DOC = ("The health of each part of the local stack, what is degraded and why: each "
              "service's health endpoint, NATS's monitoring endpoint, whether Postgres listens. "
              "Exit code 0 when every part is ok, 1 when one is degraded, 2 when one is down.")

#: Verbs that parse their own options (argparse's REMAINDER would drop leading flags): `main`
#: hands them the rest of the command line untouched. verb -> (help, "module:function" under
#: `totalrecall`, called with that rest and returning the exit code).
PASSTHROUGH: dict[str, tuple[str, str]] = {
    "rebuild": ("re-create Zvec and Postgres from the Markdown ground truth, with a progress bar "
                "(online through the running indexer, or offline: `totalrecall rebuild --help`)",
                "commands.rebuild:main"),
    "model": ("embedding model management (`totalrecall model build --help`)",
              "commands.model:main"),
    "import": ("bring history in, idempotently, with a progress bar: openclaw, claude-code, "
               "shell, journal, logs, jsonl (`totalrecall import --help`)", "commands.importing:main"),
    "ledger": ("the agent's action ledger: `totalrecall ledger verify [--path] [--json]`",
               "commands.ledger:main"),
}


def passthrough(verb: str, argv: list[str]) -> int:
    module, _, function = PASSTHROUGH[verb][1].partition(":")
    run = getattr(importlib.import_module(f"totalrecall.{module}"), function)
    return int(run(argv) or 0)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the whole stack locally (nats, postgres, 4 services)")
    p.add_argument("--only", nargs="*", help="start only these services")
    p.add_argument("--prometheus", action="store_true",
                   help="also run a local Prometheus (Debian package) scraping the stack")
    p.set_defaults(func=run)
    p = sub.add_parser("status", help="health of each part: what is degraded and why",
                       description=STATUS_DOC)
    add_json_flag(p)
    p.set_defaults(func=status)
    for verb, (help_text, _target) in PASSTHROUGH.items():
        sub.add_parser(verb, add_help=False, help=help_text)


def run(args: argparse.Namespace) -> int:
    from ..supervisor import run as run_stack

    return run_stack(args.only, prometheus=args.prometheus)


def status(args: argparse.Namespace) -> int:
    from ..status import collect, exit_code, render

    report = collect()
    emit(report, lambda: render(report), args.json)
    return exit_code(report)
