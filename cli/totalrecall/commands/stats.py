"""`totalrecall stats [--namespace NS]`: how many memories, of what, in which tier, and the
indexer's view (Zvec documents per tier, model, writes held)."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import EXIT_OK, add_json_flag, api_client, api_command, emit

NAME = "stats"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(NAME, help="counts by category and tier, and the index's state",
                       description=__doc__)
    p.add_argument("--namespace", "-N", default=None,
                   help="one namespace (default: every namespace)")
    add_json_flag(p)
    p.set_defaults(func=run)


def _counts(counts: dict[str, Any] | None) -> str:
    if not counts:
        return "-"
    return " · ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -int(kv[1])))


def render(s: dict[str, Any]) -> str:
    scope = f"namespace {s['namespace']}" if s.get("namespace") else "all namespaces"
    lines = [f"Memories: {s.get('total', 0)} ({scope})"]
    if s.get("oldest"):
        lines.append(f"  from {s['oldest']} to {s.get('newest')}")
    lines.append(f"  by tier:     {_counts(s.get('by_tier'))}")
    lines.append(f"  by category: {_counts(s.get('by_category'))}")
    index = s.get("index") or {}
    if "error" in index:
        lines.append(f"Index: unavailable ({index['error']})")
    elif index:
        lines.append(f"Index: model {index.get('model')} (dim {index.get('dim')}), "
                     f"{index.get('pg_count')} in Postgres, Markdown days "
                     f"{index.get('markdown_days')}")
        lines.append(f"  Zvec documents: {_counts(index.get('docs'))}")
        for key, label in (("writes_held", "writes held"), ("reindex", "re-indexing"),
                           ("builds", "HNSW builds not done")):
            if index.get(key):
                lines.append(f"  {label}: {index[key]}")
    return "\n".join(lines)


@api_command
def run(args: argparse.Namespace) -> int:
    with api_client() as client:
        res = client.stats(namespace=args.namespace).model_dump()
    emit(res, lambda: render(res), args.json)
    return EXIT_OK
