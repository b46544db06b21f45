"""`totalrecall supersede OLD_ID "new text"`: a memory that is no longer true, replaced."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import post_json


def register(sub: Any) -> None:
    p = sub.add_parser("supersede", help="replace a memory that is no longer true (the old one "
                                         "stays as history, no longer recalled)")
    p.add_argument("old_id", help="id of the outdated memory (see `totalrecall recall`)")
    p.add_argument("summary", help="what is true now")
    p.add_argument("--detail", default="")
    p.add_argument("--namespace", default="default")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    new: dict[str, object] = {"summary": args.summary}
    if args.detail:
        new["detail"] = args.detail
    return post_json("/memory/supersede", {"old_id": args.old_id, "namespace": args.namespace,
                                           "new": new})
