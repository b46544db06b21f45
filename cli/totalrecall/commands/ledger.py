"""`totalrecall ledger verify`: walk the agent's hash-chained action ledger and report the first
break (exit 1), or how many entries verified (exit 0)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from totalrecall_schema.ledger import verify_file

from ..paths import home


def default_ledger_path() -> Path:
    """The recall API's ledger: `TR_RECALL_LEDGER_PATH`, else `$TOTALRECALL_HOME/ledger.jsonl`."""
    configured = os.environ.get("TR_RECALL_LEDGER_PATH")
    return Path(configured).expanduser() if configured else home() / "ledger.jsonl"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="totalrecall ledger")
    sub = parser.add_subparsers(dest="action", required=True)
    p_verify = sub.add_parser("verify", help="check the hash chain; exit 1 at the first break")
    p_verify.add_argument("--path", type=Path, default=None,
                          help="ledger file (default: $TR_RECALL_LEDGER_PATH or "
                               "$TOTALRECALL_HOME/ledger.jsonl)")
    p_verify.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    path: Path = args.path or default_ledger_path()
    verdict = verify_file(path)
    if args.json:
        print(json.dumps({"path": str(path), **verdict.as_dict()}))
    elif verdict.first_break is None:
        print(f"ok: {verdict.entries} entries, last seq {verdict.last_seq}, "
              f"head {verdict.last_hash[:16]} ({path})")
    else:
        b = verdict.first_break
        print(f"BROKEN at seq {b.seq} (line {b.line}): {b.reason}\n"
              f"{verdict.entries} entries before it verify ({path})")
    return 0 if verdict.ok else 1
