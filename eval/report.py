"""JSON results → markdown tables; `docs/eval.md` is regenerated from `eval/results/*.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import metrics as M
from .datasets import REPO
from .folds import LEAVE_ONE_OUT, fold_table, headline_metrics

RESULTS_DIR = REPO / "eval" / "results"
DOCS = REPO / "docs" / "eval.md"


def provenance() -> dict[str, object]:
    """What a run's figures are of: the commit, whether the tree differed from it (the results
    and the tables made of them aside), and the machine."""
    from bench.machine import describe
    from bench.runs import git_state

    commit, dirty = git_state(not_code=(":(exclude)eval/results", ":(exclude)docs/eval.md",
                                        ":(exclude)bench/results"))
    return {"commit": commit, "dirty": dirty, "machine": describe()}


#: Baselines measured on the same dev data (the benchmark data's README).
LOCOMO_BASELINES: list[tuple[str, dict[str, float]]] = [
    ("BM25 (bm25s, English stemming)", {"R@5": 0.481, "R@10": 0.563, "Hit@5": 0.536, "MRR": 0.414}),
    ("dense all-MiniLM-L6-v2, cosine", {"R@5": 0.408, "R@10": 0.510, "Hit@5": 0.464, "MRR": 0.327}),
    ("RRF (k=60) of the two", {"R@5": 0.497, "R@10": 0.597, "Hit@5": 0.557, "MRR": 0.419}),
    ("0.7·cos + 0.3·s/(1+s) (OpenClaw)", {"R@5": 0.500, "R@10": 0.605, "Hit@5": 0.558,
                                          "MRR": 0.413}),
    ("0.7·cos + 0.3·min-max(BM25)", {"R@5": 0.539, "R@10": 0.641, "Hit@5": 0.601, "MRR": 0.460}),
    ("same + session date in the text", {"R@5": 0.579, "R@10": 0.675, "Hit@5": 0.645,
                                         "MRR": 0.495}),
]
LME_BASELINES: list[tuple[str, dict[str, float]]] = [
    ("BM25 (468 non-abstention S questions)", {"session_any@5": 0.970, "session_MRR": 0.909,
                                               "turn_any@5": 0.821, "turn_all@5": 0.573,
                                               "turn_MRR": 0.674}),
]


#: Baseline rows measured elsewhere (same dev data), shown under a dataset's table.
STATIC_BASELINES = {"locomo": ("cats 1-4", LOCOMO_BASELINES), "longmemeval": ("all", LME_BASELINES)}
METRICS: dict[str, tuple[str, ...]] = {"locomo": M.LOCOMO_METRICS, "longmemeval": M.LME_METRICS,
                                       "logqa": M.LOGQA_METRICS}
TITLES = {"locomo": "LoCoMo (dev, 5 conversations)",
          "longmemeval": "LongMemEval-S (dev, non-abstention questions)",
          "logqa": "LogQA (HDFS, OpenSSH, Spark: 2,000 log lines each, train + val questions)",
          "workstation": "Workstation scenarios (real events made on this machine, seen by the "
                         "watchers)"}

#: A line under a dataset's table: what is known beyond this run.
NOTES = {"logqa": "answered@k: a line among the first k holds the gold answer (case-insensitive) and "
                  "every token with a digit that the question shares with the gold line (block ids, "
                  "addresses, ports, numbers), as whole tokens (`eval.metrics.answers_question`). "
                  "Held-out LogQA questions (not in the published data), as first measured: "
                  "answered@1 0.889 / answered@5 0.957, Hit@1 0.826 / Hit@5 0.913 (plain BM25 "
                  "answered 0.755 / 0.921); the targets there are answered@1 ≥ 0.92, answered@5 ≥ "
                  "0.98 and Hit@1 ≥ 0.85."}


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))


def metrics_of(result: dict[str, Any]) -> tuple[str, ...]:
    """The dataset's metric columns; for a dataset not listed, those its summary rows have."""
    known = METRICS.get(result["dataset"])
    if known:
        return known
    seen: dict[str, None] = {}
    for row in result["summary"].values():
        seen.update(dict.fromkeys(k for k in row if k != "n"))
    return tuple(seen)


def table(result: dict[str, Any], *, baselines: bool = True) -> str:
    """One row per summary set; a baseline the run measured itself (`result["baselines"]`: name
    → summary on the same sets) gets columns beside ours, static ones rows underneath."""
    ds = result["dataset"]
    metrics = metrics_of(result)
    measured = result.get("baselines", {}) if baselines else {}
    head = list(metrics) + [f"{short_name(b)} {m}" for b in measured for m in metrics]
    lines = ["| set | n | " + " | ".join(head) + " |", "|---|---:|" + "---:|" * len(head)]
    for name, row in result["summary"].items():
        cells = [_fmt(row.get(m)) for m in metrics]
        for base in measured.values():
            cells += [_fmt(base.get(name, {}).get(m)) for m in metrics]
        lines.append(f"| {name} | {row['n']} | " + " | ".join(cells) + " |")
    if baselines and ds in STATIC_BASELINES:
        label, rows = STATIC_BASELINES[ds]
        for name, vals in rows:
            lines.append(f"| baseline: {name} ({label}) | | "
                         + " | ".join(_fmt(vals.get(m)) for m in metrics) + " |")
    return "\n".join(lines)


def short_name(baseline: str) -> str:
    """`"BM25 (bm25s, …)"` → `"BM25"` (the column prefix)."""
    return baseline.split(" (", 1)[0]


def folds_table(result: dict[str, Any]) -> str:
    """The headline metrics on every generalisation fold (`eval.folds`), with each measured
    baseline's beside them."""
    metrics = headline_metrics(result)
    ours = fold_table(result)
    measured = {b: fold_table(result, scores_key=f"{short_name(b).lower()}_scores")
                for b in result.get("baselines", {})}
    head = list(metrics) + [f"{short_name(b)} {m}" for b in measured for m in metrics]
    lines = ["| fold | n | " + " | ".join(head) + " |", "|---|---:|" + "---:|" * len(head)]
    for name, row in ours.items():
        cells = [_fmt(row.get(m)) for m in metrics]
        for base in measured.values():
            cells += [_fmt(base.get(name, {}).get(m)) for m in metrics]
        lines.append(f"| {name} | {row['n']} | " + " | ".join(cells) + " |")
    kind = ("leave one conversation out" if result["dataset"] in LEAVE_ONE_OUT
            else "question ids split in halves by SHA-256")
    return f"Folds ({kind}; compare two runs with `python -m eval.compare OLD.json NEW.json`):" \
           + "\n\n" + "\n".join(lines)


def timing_line(result: dict[str, Any]) -> str:
    t, c = result["timing"], result["counts"]
    if "haystacks" not in c:  # events made on the machine (the workstation set), not ingested
        return (f"{c.get('scenarios', '?')} scenarios, {c['questions']} questions. Events made "
                f"and recallable in {t.get('events_wall_s')} s. Queries: {t['query_wall_s']} s, "
                f"recall latency p50 {t['recall_p50_ms']} ms, p99 {t['recall_p99_ms']} ms.")
    unit = c.get("unit", "turns")
    return (f"{c['haystacks']} namespaces, {c['turns']} {unit}, {c['questions']} questions. "
            f"Ingest until searchable: {t['ingest_wall_s']} s ({t['ingest_turns_per_s']} {unit}/s; "
            f"POSTs {t['ingest_post_s']} s; checked by {t['searchable_by']}). Queries: "
            f"{t['query_wall_s']} s, recall latency p50 {t['recall_p50_ms']} ms, "
            f"p99 {t['recall_p99_ms']} ms."
            + (f" Memories stored per namespace: {_stored(c['stored'])} (the rest folded by the "
               "embedder's dedup)." if c.get("stored") and sum(c["stored"].values()) < c["turns"]
               else "")
            + _stability(result.get("stability")))


def _stability(s: dict[str, int] | None) -> str:
    if not s:
        return ""
    return (f" Asked again at the end: {s['same_ranking']} of the first {s['asked_again']} "
            "questions ranked identically.")


def _stored(stored: dict[str, int]) -> str:
    return ", ".join(f"{ns.rsplit('-', 1)[-1]} {n}" for ns, n in stored.items())


def targets_line(result: dict[str, Any]) -> str:
    parts = []
    for m, t in result.get("targets", {}).items():
        mark = "met" if t["met"] else "NOT met"
        parts.append(f"{m} {_fmt(t['value'])} (target ≥ {t['target']}: {mark})")
    return "Targets: " + "; ".join(parts) + "." if parts else "Targets: none set."


def render(result: dict[str, Any]) -> str:
    title = TITLES.get(result["dataset"], result.get("title", result["dataset"]))
    cfg = result["config"]
    asked = (", asked as of each question's date (`asOf`)"
             if cfg.get("asOf") == "question date" and result["dataset"] == "longmemeval" else "")
    commit = result.get("commit")
    of = (f" at {str(commit)[:10]}{' (uncommitted changes)' if result.get('dirty') else ''}"
          f" on {str(result.get('machine', 'an unnamed machine')).removeprefix('machine: ')}"
          if commit else "")
    parts = [f"### {title}", "",
             f"Run {result['run_at']}{of} against {result['api']} "
             f"(timeframe \"all\", maxResults {cfg['maxResults']}{asked}).", "",
             table(result), "", timing_line(result), "", targets_line(result), ""]
    if result["dataset"] in NOTES:
        parts += [NOTES[result["dataset"]], ""]
    if result.get("questions"):
        parts += [folds_table(result), ""]
    return "\n".join(parts)


def write_json(result: dict[str, Any], path: Path | None = None) -> Path:
    path = path or RESULTS_DIR / f"{result['dataset']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return path


_HEADER = """# Retrieval evaluation

Generated by `make eval` (`python -m eval`, see `eval/`): do not edit by hand. Each LoCoMo
conversation and each LongMemEval-S question is loaded into its own namespace through the real
`POST /memory/ingest` (one memory per turn: `"<speaker>: <text>"` + image caption, the session date
as timestamp, stable ids), then every question goes through the real `POST /memory/recall`
(timeframe "all", maxResults 10; a LongMemEval question is asked as of its `question_date`, sent
as `asOf`, so that "last Saturday" means what it meant to the asker). Metrics as defined in
the benchmark data's README: LoCoMo R@k = |gold ∩ top-k| / |gold|, Hit@5, MRR of the first gold hit;
LongMemEval session level (ranked turns → sessions, deduplicated) and turn level (gold =
`has_answer` turns). Baselines (from the README) are on the same dev data.
LogQA (the data's `logqa/`: LogHub HDFS, OpenSSH and Spark samples, 2,000 lines each, with
train and val questions) is loaded as a log importer would: one memory per line, one namespace
per system, category `system.service`, source `journal`, the line's own timestamp, the text
`"<Level> <Component>[<Pid>]: <Content>"`, the component as `metadata.service`, stable ids
(`hdfs:17`); every question is asked with timeframe "all" and scored by Hit@1/5/10 and MRR of
its gold line (the line whose Content is the question's RawLog). Plain BM25 (bm25s, English
stop words + Snowball, over the same texts) is measured in the same run, columns beside ours.
Per-question results are in `eval/results/<dataset>.json`. Each section ends with its
generalisation folds (`eval/folds.py`): LoCoMo leave one conversation out, the others the
questions split in halves by a hash of their id; `python -m eval.compare OLD.json NEW.json`
prints two runs' figures and deltas on every fold and whether a change helps on all of them.

Run: `make eval` (every dataset; starts its own stack in a temporary home on free ports) or
`python -m eval --dataset locomo --api http://127.0.0.1:8765` against a running stack.
"""


def write_docs(path: Path | None = None) -> Path:
    path = path or DOCS
    parts = [_HEADER]
    from .registry import RUNNERS  # the datasets, in their order

    for ds in RUNNERS:
        f = RESULTS_DIR / f"{ds}.json"
        if f.exists():
            parts.append(render(json.loads(f.read_text())))
        cv = RESULTS_DIR / f"{ds}_query_map_cv.json"
        if cv.exists():  # a learned part's figures on data it did not learn from
            from .query_map_cv import render as render_cv

            parts.append(render_cv(json.loads(cv.read_text())))
    live = RESULTS_DIR / "live_ablations.md"
    if live.exists():  # measured through the real API, one change at a time (see its header)
        parts.append("## Live ablations (real API, LoCoMo cats 1-4)\n")
        parts.append(live.read_text())
    abl = RESULTS_DIR / "ablations.md"
    if abl.exists():
        parts.append("## Offline ablations (`python -m eval.offline`)\n\n"
                     "Pure-Python re-implementation of the scoring, no stack: BM25 = bm25s with "
                     "Postgres' English stop list and Snowball stemming, OR semantics, IDF per "
                     "namespace; dense = all-MiniLM-L6-v2 (truncated at 256 tokens, like the "
                     "embedder); `z` = z-score fusion α·z(cos) + (1-α)·z(BM25); `mm` = min-max; "
                     "`dated` = \"[8 May 2023] \" before the text; `nbβ` = + β·(best neighbouring "
                     "turn's normalised score); `window` = also score each turn joined with its "
                     "previous and next turn; `actorγ` = + γ when the query names the turn's "
                     "speaker. LongMemEval columns are empty where dense embeddings of the 24k "
                     "haystack turns were not computed.\n")
        parts.append(abl.read_text())
    notes = RESULTS_DIR / "notes.md"
    if notes.exists():  # measurements that are not a table of runs (kept by hand)
        parts.append(notes.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts).rstrip() + "\n")
    return path
