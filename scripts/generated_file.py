"""A file generated from the code, and the check that it still is what the code generates.

Shared by `scripts/api_docs.py` (docs/api.md) and `scripts/openapi_schema.py` (the OpenClaw
plugin's openapi.json): without `--check` the file is rewritten; with it, exit 1 when it differs
(unit tests run that, so the file cannot drift from the code).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(path: Path, generate: Callable[[], str], argv: list[str] | None, *,
                   description: str | None, regenerate: str) -> int:
    """`regenerate`: the command that brings the file up to date, named when it is stale."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--check", action="store_true", help=f"exit 1 when {path.name} is out of date")
    args = p.parse_args(argv)
    text = generate()
    if args.check:
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            print(f"{path} is out of date: run {regenerate}", file=sys.stderr)
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0
