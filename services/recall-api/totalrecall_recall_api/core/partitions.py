"""Merging the answers of a partitioned index: each indexer answers for the partitions it owns;
recall takes the best hits of all of them and says which partitions no one answered for."""

from __future__ import annotations

from collections.abc import Sequence

from totalrecall_schema import VectorHit, VectorSearchReply


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
