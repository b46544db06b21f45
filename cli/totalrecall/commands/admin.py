"""`totalrecall compact`: promote memories between the tiers now (hot → warm → cold)."""

from __future__ import annotations

import argparse

from ._common import EXIT_FAILED, EXIT_OK, add_json_flag, api_client, api_command, emit, fail


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compact", help="promote memories between tiers now", description=__doc__)
    add_json_flag(p)
    p.set_defaults(func=compact)


@api_command
def compact(args: argparse.Namespace) -> int:
    with api_client(timeout=600.0) as client:
        res = client.compact().model_dump()
    if not res.get("ok", True):
        return fail(f"compaction failed: {res.get('error')}", args.json, EXIT_FAILED)
    result = res.get("result") or {}
    moved = result.get("moved") or {}
    emit(res, "Compacted: " + (", ".join(f"{k} {v}" for k, v in moved.items()) or "nothing"),
         args.json)
    return EXIT_OK
