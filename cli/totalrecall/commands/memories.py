"""`totalrecall ingest | recall | timeline | forget`: store a memory, ask for memories, list what
happened, forget memories for good.

`forget ID... [--namespace NS]` takes the ids recall shows: the memories go from Postgres, every
Zvec tier and the Markdown daily logs, and the indexer keeps a tombstone so that no redelivered
or replayed event brings them back. Exit 1 when some ids were found nowhere."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    add_json_flag,
    add_namespace_flag,
    api_client,
    api_command,
    default_namespace,
    emit,
)

TIMEFRAMES = ("auto", "1h", "24h", "7d", "30d", "90d", "all")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ingest", help="store one memory")
    p.add_argument("summary", help="one line: what to remember")
    p.add_argument("--detail", default="", help="the specifics")
    p.add_argument("--category", default="conversation")
    p.add_argument("--tag", action="append", dest="tags", default=[], help="a tag (repeatable)")
    p.add_argument("--id", default=None, help="a stable id (makes a repeat a no-op)")
    add_namespace_flag(p)
    add_json_flag(p)
    p.set_defaults(func=ingest)

    p = sub.add_parser("recall", help="recall the memories relevant to a question")
    p.add_argument("query")
    p.add_argument("--timeframe", default="auto", choices=TIMEFRAMES)
    p.add_argument("--category", default=None)
    p.add_argument("-n", "--max-results", type=int, default=6)
    p.add_argument("--host", action="append", dest="hosts", metavar="HOST",
                   help="only memories of events on this host (repeatable)")
    p.add_argument("--block", action="store_true",
                   help="print the <system_memory> block an agent's prompt gets")
    add_namespace_flag(p)
    add_json_flag(p)
    p.set_defaults(func=recall)

    p = sub.add_parser("timeline", help="what happened in the last hours, oldest first")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--category", default=None)
    p.add_argument("--limit", type=int, default=200)
    add_namespace_flag(p)
    add_json_flag(p)
    p.set_defaults(func=timeline)

    p = sub.add_parser("forget", help="forget memories for good, by id (as recall shows them)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ids", nargs="+", metavar="ID", help="memory id (`totalrecall recall` shows them)")
    add_namespace_flag(p, "the namespace the memories are in")
    add_json_flag(p)
    p.set_defaults(func=forget)


def _line(m: Any, with_id: bool = True) -> str:
    when = m.timestamp.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    sev = f" {m.severity}" if m.severity not in ("info", "") else ""
    ident = f"  [{m.id}]" if with_id else ""
    return f"{when}Z  {m.category}{sev}  {m.summary}{ident}"


@api_command
def ingest(args: argparse.Namespace) -> int:
    event: dict[str, Any] = {"summary": args.summary, "detail": args.detail,
                             "category": args.category, "tags": args.tags,
                             "namespace": args.namespace or default_namespace()}
    if args.id:
        event["id"] = args.id
    with api_client() as client:
        res = client.ingest(event)
    dup = " (already stored)" if res.duplicates else ""
    emit(res.model_dump(), f"Stored{dup}: id {', '.join(res.ids)}", args.json)
    return EXIT_OK


@api_command
def recall(args: argparse.Namespace) -> int:
    with api_client() as client:
        res = client.recall(args.query, max_results=args.max_results, timeframe=args.timeframe,
                            category=args.category, namespace=args.namespace or default_namespace(),
                            hosts=args.hosts)

    def human() -> str:
        if args.block:
            return res.system_memory
        if not res.memories:
            return "No matching memories."
        return "\n".join(f"{m.score:5.2f}  {_line(m)}" for m in res.memories)

    emit(res.model_dump(mode="json"), human, args.json)
    return EXIT_OK


def render_timeline(memories: Sequence[Any], hours: float) -> str:
    if not memories:
        return f"Nothing recorded in the last {hours:g} hours."
    return "\n".join(_line(m) for m in memories)


@api_command
def timeline(args: argparse.Namespace) -> int:
    with api_client() as client:
        res = client.timeline(args.hours, category=args.category, limit=args.limit,
                              namespace=args.namespace or default_namespace())
    emit(res.model_dump(mode="json"), lambda: render_timeline(res.memories, args.hours),
         args.json)
    return EXIT_OK


@api_command
def forget(args: argparse.Namespace) -> int:
    namespace = args.namespace or default_namespace()
    with api_client() as client:
        res = client.forget(args.ids, namespace=namespace)
    n = res.forgotten

    def human() -> str:
        lines = [f"Forgot {n} memor{'y' if n == 1 else 'ies'} in namespace {namespace}."]
        if res.missing:
            lines.append(f"Not found (nothing to forget): {', '.join(res.missing)}")
        return "\n".join(lines)

    emit({"namespace": namespace, **res.model_dump()}, human, args.json)
    return EXIT_FAILED if res.missing else EXIT_OK
