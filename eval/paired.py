"""A recall setting measured paired: the same memories, vectors and questions, two recall APIs.

    python -m eval.paired --dataset locomo TR_RECALL_EMBED_WITHOUT_SPEAKERS=false
    python -m eval.paired --dataset workstation TR_RECALL_RESTATED_TURNS_ONCE=false

One stack (`eval.stack.Stack`) ingests the dataset once and its own recall API (this checkout's
defaults) asks every question: the *default* run. Then a second recall API over the same NATS,
Postgres and indexer, with the given settings on top of the stack's environment, asks them
again: the *variant* run. The workstation set's events are made once, for real, by a stack
whose watchers watch its paths. On one stack the ranking is deterministic, so every difference
between the two runs is the settings'. Prints `python -m eval.compare` of the two (the variant
as OLD, the default as NEW: a positive delta is what the default gains over the variant) and
writes both runs to `eval/results/paired/<dataset>-{default,variant}.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .client import RecallClient
from .compare import compare, render
from .datasets import load
from .logqa_runner import run_logqa
from .report import RESULTS_DIR, provenance
from .runner import run_dataset
from .stack import SecondApi, Stack, recall_api_env

OUT_DIR = RESULTS_DIR / "paired"
DATASETS = ("locomo", "longmemeval", "logqa", "workstation")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _ask(url: str, dataset: str, tag: str) -> dict[str, Any]:
    client = RecallClient(url)
    try:
        if dataset == "logqa":
            return run_logqa(client, tag=tag, log=_log)
        return run_dataset(client, dataset, load(dataset), tag=tag, log=_log)
    finally:
        client.close()


def _workstation(variant: dict[str, str], tmp: Path, tag: str
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workstation set's events made once; its questions asked of both recall APIs."""
    from .workstation import Paths, ask, make_events, questions, result

    paths = Paths.make(tmp / "machine")
    with Stack(log=_log, with_watchers=True, extra_env=paths.stack_env()) as stack, \
            contextlib.ExitStack() as opened:  # closed in reverse, on error too
        client = RecallClient(stack.api)
        opened.callback(client.close)
        t0 = time.perf_counter()
        world = make_events(client, paths, log=_log, seed=f"workstation:{tag}")
        opened.callback(world.stop)
        made = time.perf_counter() - t0
        qs = questions(world)
        api = SecondApi(recall_api_env(stack), variant, tmp / "recall-api-variant.log")
        opened.callback(api.close)
        other = RecallClient(api.url)
        opened.callback(other.close)
        runs = []
        for c in (client, other):
            t1 = time.perf_counter()
            rows = ask(c, qs)
            runs.append(result(c, tag, world, rows, made, time.perf_counter() - t1))
    return runs[0], runs[1]


def run(dataset: str, variant: dict[str, str], out_dir: Path = OUT_DIR) -> tuple[Path, Path]:
    tag = f"pa{int(time.time())}"
    with tempfile.TemporaryDirectory(prefix="tr-paired-") as tmp:
        if dataset == "workstation":
            default, other = _workstation(variant, Path(tmp), tag)
        else:
            with Stack(log=_log) as stack:
                default = _ask(stack.api, dataset, tag)
                api = SecondApi(recall_api_env(stack), variant,
                                Path(tmp) / "recall-api-variant.log")
                try:
                    other = _ask(api.url, dataset, tag)  # ingest again: every id known
                finally:
                    api.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / f"{dataset}-default.json", out_dir / f"{dataset}-variant.json"
    for path, result, env in ((paths[0], default, {}), (paths[1], other, variant)):
        path.write_text(json.dumps({**result, **provenance(), "settings": env}, indent=1) + "\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=DATASETS, default="locomo")
    ap.add_argument("settings", nargs="+", metavar="TR_RECALL_X=value",
                    help="the variant's recall API settings")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    variant = dict(kv.split("=", 1) for kv in args.settings)
    if not all(k.startswith("TR_RECALL_") for k in variant):
        ap.error("settings are the recall API's: TR_RECALL_<NAME>=<value>")
    default_path, variant_path = run(args.dataset, variant, args.out_dir)
    old, new = (json.loads(p.read_text()) for p in (variant_path, default_path))
    print(render(old, new, compare(old, new)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
