"""Run one benchmark through the real API: ingest every haystack, wait, ask each question, score."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from . import metrics as M
from .client import RecallClient, SearchableWaiter, make_id_resolver, ranked_ids
from .datasets import Haystack, namespace_for
from .stability import AGAIN_AFTER_S, ASK_AGAIN, Asked, ask_again, ids_of

TARGETS = {
    "locomo": {"R@10": 0.85, "R@5": 0.75},
    "longmemeval": {"turn_any@5": 0.95, "session_any@5": 0.99},
}


def score_question(dataset: str, h: Haystack, q_gold: frozenset[str],
                   q_gold_sessions: frozenset[str], ranked: Sequence[str]) -> dict[str, float]:
    if dataset == "locomo":
        return M.locomo_scores(ranked, q_gold)
    return M.longmemeval_scores(ranked, q_gold, q_gold_sessions, h.session_of)


def summarise(dataset: str, per_question: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rows (name → {n, metric means}) in display order: headline first, then each category."""
    pairs = [(r["category"], r["scores"]) for r in per_question]
    if dataset == "locomo":
        groups: dict[str, Sequence[str] | None] = {"cats 1-4": M.LOCOMO_HEADLINE}
        for c in ("1", "2", "3", "4", "5"):
            if any(cat == c for cat, _ in pairs):
                groups[f"{c} {M.LOCOMO_CATEGORY_NAMES[c]}"] = (c,)
        metrics: Sequence[str] = M.LOCOMO_METRICS
    else:
        groups = {"all": None}
        for c in sorted({cat for cat, _ in pairs}):
            groups[c] = (c,)
        metrics = M.LME_METRICS
    rows = M.aggregate(pairs, metrics, groups)
    return {r.name: {"n": r.n, **{m: round(v, 4) for m, v in r.means.items()}} for r in rows}


def check_targets(dataset: str, summary: dict[str, Any]) -> dict[str, Any]:
    head = summary.get("cats 1-4" if dataset == "locomo" else "all", {})
    return {m: {"target": t, "value": head.get(m), "met": head.get(m, 0.0) >= t}
            for m, t in TARGETS[dataset].items()}


def run_dataset(client: RecallClient, dataset: str, haystacks: Sequence[Haystack], *, tag: str,
                max_results: int = 10, batch_size: int = 200, wait_timeout: float = 3600.0,
                log: Callable[[str], None] = print, ask_as_of: bool = True) -> dict[str, Any]:
    """`ask_as_of`: ask each question at its dataset's question date (recall's `asOf`) when it
    has one; False asks at the real now (an ablation)."""
    namespaces = {h.key: namespace_for(tag, h.key) for h in haystacks}
    n_turns = sum(len(h.unique_turns()) for h in haystacks)
    n_questions = sum(len(h.questions) for h in haystacks)
    log(f"[{dataset}] ingesting {n_turns} turns into {len(haystacks)} namespaces "
        f"(tag {tag!r}), then {n_questions} questions")

    t0 = time.perf_counter()
    accepted = duplicates = 0
    for h in haystacks:
        ns = namespaces[h.key]
        events = [t.to_ingest(ns) for t in h.unique_turns()]
        for i in range(0, len(events), batch_size):
            resp = client.ingest(events[i:i + batch_size])
            accepted += int(resp.get("accepted", len(resp.get("ids", []))))
            duplicates += int(resp.get("duplicates", 0))
    post_s = time.perf_counter() - t0
    log(f"[{dataset}] posted in {post_s:.1f}s (accepted {accepted}, duplicates {duplicates}); "
        "waiting until searchable")
    waiter = SearchableWaiter(client, {namespaces[h.key]: h.unique_turns() for h in haystacks},
                              log=log)
    waiter.wait(wait_timeout)
    ingest_s = time.perf_counter() - t0
    log(f"[{dataset}] searchable after {ingest_s:.1f}s ({n_turns / ingest_s:.1f} turns/s, "
        f"by {waiter.method})")

    per_question: list[dict[str, Any]] = []
    latencies: list[float] = []
    server_ms: list[float] = []
    asked: list[Asked] = []
    t1 = time.perf_counter()
    for h in haystacks:
        ns = namespaces[h.key]
        resolve = make_id_resolver(ns, h.turns)
        for q in h.questions:
            as_of = q.asked_at if ask_as_of else None
            mems, ms, body = client.recall(q.question, ns, max_results=max_results, as_of=as_of)
            if len(asked) < ASK_AGAIN:
                asked.append(Asked(q.question, ns, as_of, ids_of(mems)))
            latencies.append(ms)
            if isinstance(body.get("took_ms"), (int, float)):
                server_ms.append(float(body["took_ms"]))
            ranked = ranked_ids(mems, resolve)
            unknown = sum(1 for m in mems if resolve(m) is None)
            per_question.append({
                "qid": q.qid, "haystack": h.key, "category": q.category, "question": q.question,
                "gold": sorted(q.gold), "gold_sessions": sorted(q.gold_sessions),
                "ranked": ranked, "unknown_results": unknown, "latency_ms": round(ms, 2),
                "query_class": body.get("query_class"),
                "scores": score_question(dataset, h, q.gold, q.gold_sessions, ranked),
            })
        if len(per_question) % 100 < len(h.questions):
            log(f"[{dataset}] {len(per_question)}/{n_questions} questions")
    query_s = time.perf_counter() - t1
    stability = ask_again(client, asked, max_results, log=log,
                          not_before=t1 + AGAIN_AFTER_S)

    summary = summarise(dataset, per_question)
    return {
        "dataset": dataset,
        "run_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "api": client.base,
        "tag": tag,
        "config": {"timeframe": "all", "maxResults": max_results, "batch_size": batch_size,
                   "asOf": "question date" if ask_as_of else "now"},
        "counts": {"haystacks": len(haystacks), "turns": n_turns, "questions": n_questions},
        "timing": {
            "ingest_post_s": round(post_s, 2), "ingest_wall_s": round(ingest_s, 2),
            "ingest_turns_per_s": round(n_turns / ingest_s, 2) if ingest_s else None,
            "searchable_by": waiter.method,
            "query_wall_s": round(query_s, 2),
            "recall_p50_ms": round(M.percentile(latencies, 50), 1),
            "recall_p99_ms": round(M.percentile(latencies, 99), 1),
            "recall_server_p50_ms": round(M.percentile(server_ms, 50), 1) if server_ms else None,
        },
        "stability": stability,
        "summary": summary,
        "targets": check_targets(dataset, summary),
        "questions": per_question,
    }
