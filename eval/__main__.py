"""`python -m eval [--dataset locomo|longmemeval|logqa|all] [--limit N] [--api URL] [--start-stack]`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import uuid
from contextlib import ExitStack
from pathlib import Path

from . import report
from .client import RecallClient
from .registry import RUNNERS, RunOptions


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


#: The namespace prefix of a run in a stack of its own (`default_tag`).
OWN_STACK_TAG = "ev"


def default_tag(own_stack: bool) -> str:
    """The namespace prefix when none is given. A memory's key is derived from its namespace
    and id, and lines that tie on everything else (one template, one second) are ordered by
    key: a fresh prefix per run reorders them, and one code's figures moved by up to 0.02
    between runs for that alone. In a stack of its own a run cannot meet another's memories, so
    it takes a fixed prefix and ranks the same every time; against a shared stack (`--api`) a
    fresh one keeps runs apart."""
    return OWN_STACK_TAG if own_stack else f"ev{uuid.uuid4().hex[:6]}"


def main(argv: list[str] | None = None) -> int:
    # Stop the stack we started on SIGTERM too, and on SIGINT even when started in the background
    # (non-interactive shells start background jobs with SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    p = argparse.ArgumentParser(prog="python -m eval", description=__doc__)
    p.add_argument("--dataset", choices=[*RUNNERS, "all"], default="all")
    p.add_argument("--limit", type=int, default=None,
                   help="only the first N haystacks (LoCoMo conversations / LongMemEval "
                        "questions) or questions per system (LogQA)")
    p.add_argument("--api", default=None,
                   help="a running recall API (e.g. http://127.0.0.1:8765); default: start a stack")
    p.add_argument("--start-stack", action="store_true",
                   help="start `totalrecall run` in a temporary home (the default without --api)")
    p.add_argument("--keep-stack-home", action="store_true", help="keep the temporary home")
    p.add_argument("--tag", default=None,
                   help="namespace prefix (default: 'ev' in a stack of its own, a fresh one per "
                        "run against --api; reuse one to skip re-ingest cost: ingest is "
                        "idempotent by id)")
    p.add_argument("--max-results", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--wait-timeout", type=float, default=3600.0,
                   help="seconds to wait until everything ingested is searchable")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="default: $TOTALRECALL_EVAL_DATA, else an eval/ folder with the data "
                        "sets beside the repository")
    p.add_argument("--no-docs", action="store_true", help="do not rewrite docs/eval.md")
    p.add_argument("--out-dir", type=Path, default=None, help="default: eval/results")
    p.add_argument("--no-as-of", action="store_true",
                   help="ask at the real now, not at the dataset's question date (ablation)")
    args = p.parse_args(argv)

    datasets = list(RUNNERS) if args.dataset == "all" else [args.dataset]
    start_stack = args.start_stack or not args.api
    tag = args.tag or default_tag(start_stack)
    out_dir = args.out_dir or report.RESULTS_DIR
    partial = args.limit is not None

    with ExitStack() as stack:
        api = args.api
        watched = None
        if start_stack:
            from .stack import Stack

            env: dict[str, str] = {}
            if "workstation" in datasets:  # the scenarios need watchers that watch their paths
                from .workstation import Paths

                watched = Paths.make(Path(stack.enter_context(
                    tempfile.TemporaryDirectory(prefix="tr-ws-"))))
                env = watched.stack_env()
            s = stack.enter_context(Stack(keep_home=args.keep_stack_home, log=_log,
                                          with_watchers=watched is not None, extra_env=env))
            api = s.api
        assert api is not None
        client = RecallClient(api, token=os.environ.get("TOTALRECALL_API_TOKEN"))
        stack.callback(client.close)
        options = RunOptions(limit=args.limit, max_results=args.max_results,
                             batch_size=args.batch_size, wait_timeout=args.wait_timeout,
                             data_dir=args.data_dir, ask_as_of=not args.no_as_of,
                             watched=watched)
        for ds in datasets:
            result = RUNNERS[ds](client, tag, _log, options)
            result["partial"] = partial
            result.update(report.provenance())
            name = f"{ds}.limit{args.limit}.json" if partial else f"{ds}.json"
            path = report.write_json(result, out_dir / name)
            _log(f"[{ds}] results in {path}")
            print(report.render(result), flush=True)
    if not args.no_docs and not partial and args.out_dir is None:
        _log(f"docs table in {report.write_docs()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
