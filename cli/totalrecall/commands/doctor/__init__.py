"""`totalrecall doctor [--quick] [--json]`: check the install, say how to fix what is wrong.

Exit 0 when nothing failed (warnings allowed), 1 otherwise. Needs nothing running.
"""

from __future__ import annotations

import argparse

from .._common import EXIT_FAILED, EXIT_OK, add_json_flag, emit

NAME = "doctor"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(NAME, help="check the install (model, Postgres, NATS, ports, disk) and "
                                  "say how to fix each problem", description=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="do not load the model with llama.cpp (only check the file)")
    add_json_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .checks import FAIL, render, report, run_checks

    rep = report(run_checks(load_model=not args.quick))
    emit(rep, lambda: render(rep), args.json)
    return EXIT_FAILED if rep["status"] == FAIL else EXIT_OK
