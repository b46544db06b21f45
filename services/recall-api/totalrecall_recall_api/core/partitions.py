"""Merging the answers of a partitioned index: each indexer answers for the partitions it owns;
recall takes the best hits of all of them and says which partitions no one answered for."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from totalrecall_schema import AdminReply, VectorHit, VectorSearchReply


def covered(replies: Sequence[VectorSearchReply]) -> set[int]:
    """The partitions answered for (an answer that is an error covers none)."""
    return {p for r in replies if not r.error for p in (r.partitions or ())}


def merge_partition_replies(replies: Sequence[VectorSearchReply], count: int,
                            topk: int) -> VectorSearchReply:
    """One reply from the answers of several partitions' owners: one hit per key (the best;
    two owners of one partition, as while ownership moves, answer the same memory twice), best
    first, the first `topk`; the slowest owner's time per stage; `partitions` those answered
    for, `missing_partitions` the others."""
    best: dict[str, VectorHit] = {}
    took: dict[str, float] = {}
    for reply in replies:
        if reply.error:
            continue
        for hit in reply.hits:
            cur = best.get(hit.key)
            if cur is None or hit.score > cur.score:
                best[hit.key] = hit
        for stage, ms in reply.took_ms.items():
            took[stage] = max(took.get(stage, 0.0), ms)
    got = covered(replies)
    hits = sorted(best.values(), key=lambda h: (-h.score, -h.timestamp_ms, h.key))[:topk]
    return VectorSearchReply(hits=hits, took_ms=took, partitions=sorted(got),
                             missing_partitions=[p for p in range(count) if p not in got])


def merge_admin_replies(verb: str, replies: Sequence[AdminReply], count: int) -> AdminReply:
    """One answer to an admin verb from the owners of a partitioned index (each did it for its
    partitions; a standby, answering for none, did nothing and is left out). `result` keeps
    every owner's own under `owners`; `forget` adds the union of what was found, `stats` and
    `compact` the sums. A partition no owner answered for makes the answer not ok (a forget or
    compaction is then incomplete: retried, it finishes) except for `stats`, which shows what
    it could gather and names the missing partitions."""
    heard = [r for r in replies if r.partitions]
    got = {p for r in heard for p in r.partitions or ()}
    missing = [p for p in range(count) if p not in got]
    done = [r for r in heard if r.ok]
    errors = [f"partitions {r.partitions}: {r.error}" for r in heard if not r.ok]
    if missing:
        errors.append(f"no indexer answered for partitions {missing}")
    result: dict[str, object] = {
        "owners": [{"partitions": r.partitions, **r.result} for r in done]}
    results = [r.result for r in done]
    if verb == "forget":
        found = list(dict.fromkeys(k for res in results for k in _list(res.get("found"))))
        result.update(found=found, forgotten=len(found),
                      postgres=sum(_int(res.get("postgres")) for res in results),
                      zvec=sum(_int(res.get("zvec")) for res in results))
    elif verb == "stats":
        result.update(_sum_stats(results), missing_partitions=missing)
    elif verb == "compact":
        result["moved"] = _sum_counts(res.get("moved") for res in results)
    ok = bool(done) and (verb == "stats" or not errors)
    return AdminReply(ok=ok, result=result, error="; ".join(errors) or None,
                      partitions=sorted(got), missing_partitions=missing)


def _list(v: object) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


def _int(v: object) -> int:
    return v if isinstance(v, int) else 0


def _sum_counts(dicts: Iterable[object]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        if isinstance(d, dict):
            for k, v in d.items():
                out[str(k)] = out.get(str(k), 0) + _int(v)
    return out


def _sum_stats(results: Sequence[dict[str, object]]) -> dict[str, object]:
    """What `totalrecall stats` and the UI read, over every owner: documents and rows summed,
    a tier's index completeness the least of its owners'."""
    tiers: dict[str, dict[str, float]] = {}
    for res in results:
        per_tier = res.get("tiers")
        if not isinstance(per_tier, dict):
            continue
        for tier, st in per_tier.items():
            if not isinstance(st, dict):
                continue
            cur = tiers.setdefault(str(tier), {"doc_count": 0, "index_completeness": 1.0})
            cur["doc_count"] += _int(st.get("doc_count"))
            cur["index_completeness"] = min(cur["index_completeness"],
                                            float(st.get("index_completeness", 1.0)))
    pg = [res.get("pg_count") for res in results]
    first = results[0] if results else {}
    return {
        "tiers": tiers,
        "docs": {t: int(st["doc_count"]) for t, st in tiers.items()},
        "index_completeness": {t: st["index_completeness"] for t, st in tiers.items()},
        "model": first.get("model"), "dim": first.get("dim"),
        "pg_count": sum(_int(c) for c in pg) if pg and None not in pg else None,
        "pg_by_tier": _sum_counts(res.get("pg_by_tier") for res in results),
        "markdown_days": max((_int(res.get("markdown_days")) for res in results), default=0),
        "writes_held": {f"{tier} (owner {i})": why for i, res in enumerate(results)
                        for tier, why in _dict(res.get("writes_held")).items()},
        "reindex": {f"{tier} (owner {i})": why for i, res in enumerate(results)
                    for tier, why in _dict(res.get("reindex")).items()},
    }


def _dict(v: object) -> dict[str, object]:
    return {str(k): x for k, x in v.items()} if isinstance(v, dict) else {}
