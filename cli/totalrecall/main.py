"""The `totalrecall` command."""

from __future__ import annotations

import argparse
import json
import os
import sys


def _api() -> str:
    return os.environ.get("TOTALRECALL_API", "http://127.0.0.1:" +
                          os.environ.get("TOTALRECALL_API_PORT", "8765"))


def _headers() -> dict[str, str]:
    token = os.environ.get("TOTALRECALL_API_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _post(path: str, body: dict[str, object], timeout: float = 600.0) -> int:
    import httpx

    r = httpx.post(_api() + path, json=body, headers=_headers(), timeout=timeout)
    print(json.dumps(r.json(), indent=2) if r.content else r.status_code)
    return 0 if r.is_success else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="totalrecall", description="Total Recall memory system")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_run = sub.add_parser("run", help="run the whole stack locally (nats, postgres, 4 services)")
    p_run.add_argument("--only", nargs="*", help="start only these services")
    p_run.add_argument("--prometheus", action="store_true",
                       help="also run a local Prometheus (Debian package) scraping the stack")
    p_model = sub.add_parser("model", help="embedding model management")
    p_model.add_argument("action", choices=["build"])
    p_model.add_argument("rest", nargs=argparse.REMAINDER)
    sub.add_parser(
        "rebuild", add_help=False,
        help="re-create Zvec and Postgres from the Markdown ground truth, with a progress bar "
             "(online through the running indexer, or offline: `totalrecall rebuild --help`)")
    sub.add_parser(
        "import", add_help=False,
        help="bring history in, idempotently, with a progress bar: openclaw, claude-code, "
             "shell, journal, logs (`totalrecall import --help`)")
    sub.add_parser("compact", help="promote memories between tiers now")
    sub.add_parser("ledger", add_help=False,
                   help="the agent's action ledger: `totalrecall ledger verify [--path] [--json]`")
    p_status = sub.add_parser("status", help="health of each part: what is degraded and why")
    p_status.add_argument("--json", action="store_true")
    p_ingest = sub.add_parser("ingest", help="store one memory")
    p_ingest.add_argument("summary")
    p_ingest.add_argument("--detail", default="")
    p_ingest.add_argument("--category", default="conversation")
    p_ingest.add_argument("--namespace", default="default")
    p_recall = sub.add_parser("recall", help="recall memories")
    p_recall.add_argument("query")
    p_recall.add_argument("--timeframe", default="auto")
    p_recall.add_argument("--namespace", default="default")
    p_recall.add_argument("-n", "--max-results", type=int, default=6)
    from . import supersede_cmd
    supersede_cmd.register(sub)
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["rebuild"]:  # its own options (argparse's REMAINDER drops leading flags)
        from .rebuild_cmd import main as rebuild_main

        return int(rebuild_main(argv[1:]) or 0)
    if argv[:1] == ["import"]:  # likewise: its own parser, options before the source allowed
        from .import_cmd import main as import_main

        return import_main(argv[1:])
    if argv[:1] == ["ledger"]:
        from .ledger_cmd import main as ledger_main

        return ledger_main(argv[1:])
    args = parser.parse_args(argv)

    if args.cmd == "run":
        from .supervisor import run

        return run(args.only, prometheus=args.prometheus)
    if args.cmd == "model":
        from .model_build import main as build_main

        return int(build_main(args.rest) or 0)
    if args.cmd == "status":
        from .status import main as status_main

        return status_main(["--json"] if args.json else [])
    if args.cmd == "compact":
        return _post("/memory/compact", {})
    if args.cmd == "ingest":
        return _post("/memory/ingest", {"summary": args.summary, "detail": args.detail,
                                        "category": args.category, "namespace": args.namespace})
    if args.cmd == "recall":
        return _post("/memory/recall", {"query": args.query, "timeframe": args.timeframe,
                                        "namespace": args.namespace,
                                        "maxResults": args.max_results})
    if args.cmd == "supersede":
        return supersede_cmd.run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
