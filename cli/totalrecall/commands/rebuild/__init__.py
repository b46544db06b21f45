"""`totalrecall rebuild`: re-create Zvec and Postgres from the Markdown ground truth
(`memory/daily/*.md` and `memory/MEMORY.md`), with a progress bar.

- Stack running (an indexer answers on NATS): the indexer rebuilds itself (admin RPC `rebuild`);
  progress comes from `topology.rpc_index_progress`. With index partitions (`TR_PARTITIONS`),
  every partition's owner rebuilds its part and the answers of all of them are awaited.
  When only the HTTP API is reachable, `POST /memory/rebuild` is used and progress is polled
  from `GET /memory/stats`.
- Stack stopped: the rebuild runs here (`totalrecall_indexer.api.rebuild`). Postgres is
  started for the time of the rebuild if it is down and lives under `$TOTALRECALL_HOME/pg`.
  Vectors come from a running embedder (NATS) if there is one, else from the model file loaded
  here (`totalrecall_worker.llama_model`, the embedder's own model code), else the memories are
  stored unembedded (keyword search only).

The verb's parts: `online` (NATS or the API), `offline` (here), `progress` (what people see).

Settings: the indexer's (`TR_INDEXER_NATS_URL`, `TR_INDEXER_PG_DSN`, `TOTALRECALL_HOME`, …), or
the ports `totalrecall run` uses (`TOTALRECALL_NATS_PORT`, `TOTALRECALL_POSTGRES_PORT`), or flags.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .._common import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE
from .offline import postgres_running, rebuild_offline
from .online import api_answers, indexer_answers, rebuild_via_api, rebuild_via_nats
from .progress import Progress


def resolve_settings(args: argparse.Namespace) -> Any:
    """The indexer's Settings: environment (as the services get it), `totalrecall run` ports,
    then flags."""
    from totalrecall_indexer.api import Settings

    over: dict[str, Any] = {}
    if args.nats_url:
        over["nats_url"] = args.nats_url
    elif "TR_INDEXER_NATS_URL" not in os.environ and os.environ.get("TOTALRECALL_NATS_PORT"):
        over["nats_url"] = f"nats://127.0.0.1:{os.environ['TOTALRECALL_NATS_PORT']}"
    if args.pg_dsn:
        over["pg_dsn"] = args.pg_dsn
    elif "TR_INDEXER_PG_DSN" not in os.environ and os.environ.get("TOTALRECALL_POSTGRES_PORT"):
        over["pg_dsn"] = ("postgresql://postgres@127.0.0.1:"
                          f"{os.environ['TOTALRECALL_POSTGRES_PORT']}/totalrecall")
    if args.home:
        over["home"] = Path(args.home).expanduser()
    return Settings(**over)


def _api_url(args: argparse.Namespace) -> str:
    return args.api or os.environ.get("TOTALRECALL_API") or (
        "http://127.0.0.1:" + os.environ.get("TOTALRECALL_API_PORT", "8765"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="totalrecall rebuild",
        description="Re-create Zvec and Postgres from the Markdown ground truth "
                    "(memory/daily/*.md, memory/MEMORY.md).")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--online", action="store_true",
                      help="require the running stack (fail if no indexer answers)")
    mode.add_argument("--offline", action="store_true",
                      help="rebuild in this process (the indexer must be stopped)")
    p.add_argument("--nats-url", help="default: TR_INDEXER_NATS_URL or nats://127.0.0.1:4222")
    p.add_argument("--pg-dsn", help="default: TR_INDEXER_PG_DSN or the local stack's")
    p.add_argument("--home", help="state directory (default $TOTALRECALL_HOME)")
    p.add_argument("--api", help="recall API, used when NATS is not reachable "
                                 "(default $TOTALRECALL_API or http://127.0.0.1:8765)")
    p.add_argument("--embedder", choices=["auto", "nats", "local", "none"], default="auto",
                   help="offline: where vectors come from (default: running embedder, else the "
                        "model file in this process)")
    p.add_argument("--model", help="offline: model file (default the stack's)")
    p.add_argument("--threads", type=int, default=2, help="offline: embedding threads")
    p.add_argument("--no-optimize", action="store_true",
                   help="offline: skip the HNSW build at the end (searches brute-force until "
                        "the indexer builds it)")
    p.add_argument("--timeout", type=float, default=6 * 3600, help="seconds (default 6 h)")
    p.add_argument("--progress", choices=["auto", "bar", "plain", "none"], default="auto")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    """`totalrecall rebuild [options]`; returns the exit code."""
    args = build_parser().parse_args(argv)
    view = Progress(args.progress)
    try:
        settings = resolve_settings(args)
        how = "offline"
        if not args.offline:
            if asyncio.run(indexer_answers(settings)):
                how = "nats"
            elif api_answers(_api_url(args)):
                how = "api"
            elif args.online:
                print("no running indexer answers (NATS or API)", file=sys.stderr)
                return EXIT_UNREACHABLE
        print(f"rebuild: {'the running indexer' if how != 'offline' else 'offline'}"
              f"{' via the API' if how == 'api' else ''} — state in {settings.home}",
              file=sys.stderr)
        t0 = time.monotonic()
        if how == "nats":
            result = asyncio.run(rebuild_via_nats(settings, view, args.timeout))
        elif how == "api":
            result = rebuild_via_api(_api_url(args), view, args.timeout)
        else:
            with postgres_running(settings):
                result = asyncio.run(rebuild_offline(settings, args, view))
    except KeyboardInterrupt:
        view.close()
        print("interrupted", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        view.close()
        msg = str(exc)
        if "lock" in msg.lower():
            msg += " (is the indexer still running? stop it or run without --offline)"
        print(f"rebuild failed: {msg}", file=sys.stderr)
        return EXIT_FAILED
    view.close()
    result.setdefault("mode", how)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(_summary(result, time.monotonic() - t0))
    return EXIT_OK



def _summary(r: dict[str, Any], took: float) -> str:
    md = r.get("memory_md") or {}
    parts = [f"rebuilt {r.get('records', 0)} memories from the daily logs "
             f"({r.get('embedded', 0)} embedded, {r.get('unembedded', 0)} without vectors)"]
    if md:
        parts.append(f"{md.get('entries', 0)} from MEMORY.md")
    if r.get("model"):
        parts.append(f"model {r['model']}")
    if r.get("optimized"):
        parts.append("HNSW built: " + ", ".join(f"{t} {s:.1f}s"
                                                for t, s in r["optimized"].items()))
    return "; ".join(parts) + f" in {took:.1f}s"




if __name__ == "__main__":
    raise SystemExit(main())
