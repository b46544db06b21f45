"""The `totalrecall` command: a thin dispatcher over `commands` (one module per verb or group).

Human output by default, `--json` on every verb that reports something."""

from __future__ import annotations

import argparse
import os
import sys

from .commands import MODULES
from .commands.stack import PASSTHROUGH, passthrough


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="totalrecall", description="Total Recall memory system")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for module in MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in PASSTHROUGH:  # their own options (argparse's REMAINDER drops flags)
        return passthrough(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # `totalrecall export | head`: the reader has what it wanted
        # Python flushes stdout again at exit: point it at /dev/null so that says nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
