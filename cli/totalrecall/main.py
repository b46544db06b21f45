"""The `totalrecall` command: a thin dispatcher over `commands` (one module per verb or group).

Human output by default, `--json` on every verb that reports something."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .commands import MODULES
from .commands.stack import PASSTHROUGH, passthrough


def _post(path: str, body: dict[str, object], timeout: float = 600.0) -> int:
    """POST `body` to the recall API and print its JSON answer (for verbs that need no more)."""
    import httpx

    from .commands._common import api_url

    token = os.environ.get("TOTALRECALL_API_TOKEN")
    r = httpx.post(api_url() + path, json=body, timeout=timeout,
                   headers={"Authorization": f"Bearer {token}"} if token else {})
    print(json.dumps(r.json(), indent=2) if r.content else r.status_code)
    return 0 if r.is_success else 1


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
