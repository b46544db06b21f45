"""The datasets `python -m eval` knows, in the order `--dataset all` runs and docs/eval.md shows
them. Each is a `Runner`: (client, tag, log, options) → a result dict in `runner.run_dataset`'s
shape (dataset, run_at, config, counts, timing, summary, targets, questions with per-question
`scores`), which `report` renders and `folds` / `compare` read.

To add a dataset: write its module (loader + a run function), then add one entry to `RUNNERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .client import RecallClient

Log = Callable[[str], None]


@dataclass(frozen=True)
class RunOptions:
    limit: int | None = None            # only the first N haystacks / questions (a smoke run)
    max_results: int = 10
    batch_size: int = 200
    wait_timeout: float = 3600.0
    data_dir: Path | None = None        # default: datasets.default_data_dir()
    ask_as_of: bool = True              # ask at the dataset's question date where it has one
    watched: Any = None                 # workstation.Paths the stack's watchers watch (None:
                                        # read from the TR_WATCHERS_* environment)


Runner = Callable[[RecallClient, str, Log, RunOptions], dict[str, Any]]


def _conversations(dataset: str) -> Runner:
    """LoCoMo / LongMemEval: dialogue turns, one namespace per haystack (`runner.run_dataset`)."""
    def run(client: RecallClient, tag: str, log: Log, o: RunOptions) -> dict[str, Any]:
        from .datasets import load
        from .runner import run_dataset

        return run_dataset(client, dataset, load(dataset, limit=o.limit, data_dir=o.data_dir),
                           tag=tag, max_results=o.max_results, batch_size=o.batch_size,
                           wait_timeout=o.wait_timeout, log=log, ask_as_of=o.ask_as_of)
    return run


def _logqa(client: RecallClient, tag: str, log: Log, o: RunOptions) -> dict[str, Any]:
    from .logqa_runner import run_logqa

    return run_logqa(client, tag=tag, log=log, max_results=o.max_results,
                     batch_size=o.batch_size, wait_timeout=o.wait_timeout, data_dir=o.data_dir,
                     limit=o.limit)


def _workstation(client: RecallClient, tag: str, log: Log, o: RunOptions) -> dict[str, Any]:
    """Real events made on this machine, seen by the stack's watchers, then asked about."""
    from .workstation import run_workstation

    return run_workstation(client, tag=tag, log=log, paths=o.watched,
                           max_results=o.max_results)


RUNNERS: dict[str, Runner] = {
    "locomo": _conversations("locomo"),
    "longmemeval": _conversations("longmemeval"),
    "logqa": _logqa,
    "workstation": _workstation,
}
