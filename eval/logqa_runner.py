"""Run LogQA through the real API (ingest every system's lines, wait, ask, score) beside plain
BM25 on the same lines and questions. The result has `run_dataset`'s shape, plus `baselines`
(name → summary) and each question's `bm25_ranked` and `bm25_scores`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import metrics as M
from .bm25_baseline import NAME as BM25_NAME
from .bm25_baseline import bm25_rankings
from .client import RecallClient, make_id_resolver, namespace_count, ranked_ids
from .datasets import namespace_for
from .logqa import SPLITS, LogQuestion, LogSystem, load_logqa

DATASET = "logqa"
#: The targets (on held-out questions; shown here on train/val).
TARGETS = {"answered@1": 0.92, "answered@5": 0.98, "Hit@1": 0.85}


def summary_groups(systems: Sequence[str]) -> dict[str, Sequence[str] | None]:
    """Rows: all, each split, each system, each system × split (categories `"<system> <split>"`)."""
    groups: dict[str, Sequence[str] | None] = {"all": None}
    for split in SPLITS:
        groups[split] = tuple(f"{s} {split}" for s in systems)
    for s in systems:
        groups[s] = tuple(f"{s} {split}" for split in SPLITS)
        for split in SPLITS:
            groups[f"{s} {split}"] = (f"{s} {split}",)
    return groups


def summarise(per_question: Sequence[dict[str, Any]], systems: Sequence[str],
              scores_key: str = "scores") -> dict[str, Any]:
    pairs = [(q["category"], q[scores_key]) for q in per_question]
    rows = M.aggregate(pairs, M.LOGQA_METRICS, summary_groups(systems))
    return {r.name: {"n": r.n, **{m: round(v, 4) for m, v in r.means.items()}}
            for r in rows if r.n}


def answering(q: LogQuestion, text_of: Mapping[str, str]) -> Callable[[str], bool]:
    """Line id → does that line answer `q` (`metrics.answers_question`, against the text of
    its gold line)."""
    gold = text_of[min(q.gold)]
    return lambda line_id: line_id in text_of and M.answers_question(
        text_of[line_id], q.question, q.answer, gold)


def wait_drained(client: RecallClient, expected: Mapping[str, int], sentinel_ns: str, *,
                 timeout: float, settle_s: float = 5.0, every: float = 1.0,
                 log: Callable[[str], None] = print) -> tuple[str, dict[str, int]]:
    """Wait until the pipeline has stored what was posted → (how it was decided, memories per
    namespace). Every namespace holding all its lines ends it; so does the sentinel (posted after
    every line, into its own namespace: the pipeline is FIFO) being stored while the counts stay
    put for `settle_s`, because the embedder's dedup may fold lines into fewer memories."""
    t0 = last_log = time.monotonic()
    last: dict[str, int] = {}
    stable_since = t0
    while True:
        counts = {ns: namespace_count(client.stats(ns), ns) or 0 for ns in expected}
        if all(counts[ns] >= n for ns, n in expected.items()):
            return "stats", counts
        now = time.monotonic()
        if counts != last:
            last, stable_since = counts, now
        sentinel = namespace_count(client.stats(sentinel_ns), sentinel_ns) or 0
        if sentinel and now - stable_since >= settle_s:
            return "sentinel + stable counts (lines folded)", counts
        if now - t0 > timeout:
            raise TimeoutError(f"LogQA not stored after {timeout:.0f}s: {counts} of {expected}")
        if now - last_log > 30:
            last_log = now
            log(f"  waiting for the pipeline: {counts} of {dict(expected)} ({now - t0:.0f}s)")
        time.sleep(every)


def _ingest(client: RecallClient, systems: Sequence[LogSystem], namespaces: Mapping[str, str],
            sentinel_ns: str, tag: str, batch_size: int) -> tuple[int, int]:
    accepted = duplicates = 0
    for s in systems:
        events = [ln.to_ingest(namespaces[s.name]) for ln in s.lines]
        for i in range(0, len(events), batch_size):
            resp = client.ingest(events[i:i + batch_size])
            accepted += int(resp.get("accepted", len(resp.get("ids", []))))
            duplicates += int(resp.get("duplicates", 0))
    client.ingest([{"id": "sentinel", "namespace": sentinel_ns, "source": "eval",
                    "category": "system.service", "summary": f"LogQA eval sentinel {tag}"}])
    return accepted, duplicates


def run_logqa(client: RecallClient, *, tag: str, log: Callable[[str], None] = print,
              max_results: int = 10, batch_size: int = 200, wait_timeout: float = 3600.0,
              data_dir: Path | None = None, limit: int | None = None) -> dict[str, Any]:
    """`limit`: only the first N questions of each system (all its lines are still loaded)."""
    systems = load_logqa(data_dir)
    if limit:
        for s in systems:
            s.questions = s.questions[:limit]
    names = [s.name for s in systems]
    namespaces = {s.name: namespace_for(tag, f"logqa-{s.name}") for s in systems}
    sentinel_ns = namespace_for(tag, "logqa-sentinel")
    n_lines = sum(len(s.lines) for s in systems)
    n_questions = sum(len(s.questions) for s in systems)
    log(f"[{DATASET}] ingesting {n_lines} log lines into {len(systems)} namespaces "
        f"(tag {tag!r}), then {n_questions} questions")

    t0 = time.perf_counter()
    accepted, duplicates = _ingest(client, systems, namespaces, sentinel_ns, tag, batch_size)
    post_s = time.perf_counter() - t0
    log(f"[{DATASET}] posted in {post_s:.1f}s (accepted {accepted}, duplicates {duplicates}); "
        "waiting until stored")
    method, stored = wait_drained(client, {namespaces[s.name]: len(s.lines) for s in systems},
                                  sentinel_ns, timeout=wait_timeout, log=log)
    ingest_s = time.perf_counter() - t0
    log(f"[{DATASET}] stored after {ingest_s:.1f}s (by {method}): memories per namespace "
        f"{stored}")

    per_question: list[dict[str, Any]] = []
    latencies: list[float] = []
    server_ms: list[float] = []
    t1 = time.perf_counter()
    #: each system's line texts by line id (what `answering` checks a ranked line against)
    texts = {s.name: {ln.id: ln.text for ln in s.lines} for s in systems}
    for s in systems:
        ns = namespaces[s.name]
        resolve = make_id_resolver(ns, s.lines)
        text_of = texts[s.name]
        for q in s.questions:
            mems, ms, body = client.recall(q.question, ns, max_results=max_results)
            latencies.append(ms)
            if isinstance(body.get("took_ms"), (int, float)):
                server_ms.append(float(body["took_ms"]))
            ranked = ranked_ids(mems, resolve)
            per_question.append({
                "qid": q.qid, "haystack": s.name, "category": q.category,
                "question": q.question, "answer": q.answer, "gold": sorted(q.gold),
                "ranked": ranked, "unknown_results": sum(1 for m in mems if resolve(m) is None),
                "latency_ms": round(ms, 2), "query_class": body.get("query_class"),
                "scores": M.logqa_scores(ranked, q.gold, answering(q, text_of)),
            })
        log(f"[{DATASET}] {len(per_question)}/{n_questions} questions")
    query_s = time.perf_counter() - t1

    by_qid = {q["qid"]: q for q in per_question}
    for s in systems:
        text_of = texts[s.name]
        rankings = bm25_rankings([ln.id for ln in s.lines], [ln.text for ln in s.lines],
                                 [q.question for q in s.questions], k=max_results)
        for q, ranked in zip(s.questions, rankings, strict=True):
            by_qid[q.qid]["bm25_ranked"] = ranked
            by_qid[q.qid]["bm25_scores"] = M.logqa_scores(ranked, q.gold,
                                                          answering(q, text_of))

    summary = summarise(per_question, names)
    bm25 = summarise(per_question, names, scores_key="bm25_scores")
    head = summary.get("all", {})
    return {
        "dataset": DATASET,
        "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "api": client.base,
        "tag": tag,
        "config": {"timeframe": "all", "maxResults": max_results, "batch_size": batch_size,
                   "asOf": "now"},
        "counts": {"haystacks": len(systems), "turns": n_lines, "questions": n_questions,
                   "unit": "log lines", "stored": stored},
        "timing": {
            "ingest_post_s": round(post_s, 2), "ingest_wall_s": round(ingest_s, 2),
            "ingest_turns_per_s": round(n_lines / ingest_s, 2) if ingest_s else None,
            "searchable_by": method,
            "query_wall_s": round(query_s, 2),
            "recall_p50_ms": round(M.percentile(latencies, 50), 1),
            "recall_p99_ms": round(M.percentile(latencies, 99), 1),
            "recall_server_p50_ms": round(M.percentile(server_ms, 50), 1) if server_ms else None,
        },
        "summary": summary,
        "baselines": {BM25_NAME: bm25},
        "targets": {m: {"target": t, "value": head.get(m), "met": head.get(m, 0.0) >= t}
                    for m, t in TARGETS.items()},
        "questions": per_question,
    }
