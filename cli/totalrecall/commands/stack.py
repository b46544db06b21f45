"""`totalrecall run | status | model | rebuild`: the local stack, its health, its model and its
indexes (the long-standing verbs; the stack's code lives beside: supervisor, status, model_build;
the rebuild's in `commands.rebuild`)."""

from __future__ import annotations

import argparse
import importlib

#: Verbs that parse their own options (argparse's REMAINDER would drop leading flags): `main`
#: hands them the rest of the command line untouched. verb -> (help, "module:function" under
#: `totalrecall`, called with that rest and returning the exit code).
PASSTHROUGH: dict[str, tuple[str, str]] = {
    "rebuild": ("re-create Zvec and Postgres from the Markdown ground truth, with a progress bar "
                "(online through the running indexer, or offline: `totalrecall rebuild --help`)",
                "commands.rebuild:main"),
    "model": ("embedding model management (`totalrecall model build --help`)",
              "commands.stack:model"),
    "import": ("bring history in, idempotently, with a progress bar: openclaw, claude-code, "
               "shell, journal, logs, jsonl (`totalrecall import --help`)", "commands.importing:main"),
    "ledger": ("the agent's action ledger: `totalrecall ledger verify [--path] [--json]`",
               "commands.ledger:main"),
}


def passthrough(verb: str, argv: list[str]) -> int:
    module, _, function = PASSTHROUGH[verb][1].partition(":")
    run = getattr(importlib.import_module(f"totalrecall.{module}"), function)
    return int(run(argv) or 0)


def model(argv: list[str]) -> int:
    if argv[:1] != ["build"]:
        print("usage: totalrecall model build [options]  (`totalrecall model build --help`)")
        return 2
    from ..model_build import main as build_main

    return int(build_main(argv[1:]) or 0)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="run the whole stack locally (nats, postgres, 4 services)")
    p.add_argument("--only", nargs="*", help="start only these services")
    p.add_argument("--prometheus", action="store_true",
                   help="also run a local Prometheus (Debian package) scraping the stack")
    p.set_defaults(func=run)
    p = sub.add_parser("status", help="health of each part: what is degraded and why")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=status)
    for verb, (help_text, _target) in PASSTHROUGH.items():
        sub.add_parser(verb, add_help=False, help=help_text)


def run(args: argparse.Namespace) -> int:
    from ..supervisor import run as run_stack

    return run_stack(args.only, prometheus=args.prometheus)


def status(args: argparse.Namespace) -> int:
    from ..status import main as status_main

    return status_main(["--json"] if args.json else [])
