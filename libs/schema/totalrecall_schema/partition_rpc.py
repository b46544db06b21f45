"""Asking a partitioned index: one request, an answer from every owner, merged.

Each indexer answers a request on the index subjects (`Topology.rpc_vector_search`,
`rpc_index_admin`) for the partitions it holds the lease of (`partitions` in its answer; a
standby answers for none and does nothing). A caller publishes once with its own reply inbox
and gathers answers until every partition is heard from, or its timeout (`gather`): NATS's
own scatter-gather, no layer of ours. The recall API and `totalrecall rebuild` both ask this
way, and merge admin answers with `merge_admin_replies`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from .rpc import AdminReply

R = TypeVar("R")


async def gather(nc: Any, subject: str, body: bytes, timeout: float, count: int,
                 parse: Callable[[bytes], R], heard: Callable[[list[R]], set[int]]) -> list[R]:
    """Publish `body` once on `subject` and collect the parsed answers until `heard(answers)`
    covers partitions 0..count-1, or `timeout` seconds have passed (then whatever came)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    replies: list[R] = []
    want = set(range(count))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        await nc.publish(subject, body, reply=inbox)
        while not heard(replies) >= want:
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                msg = await sub.next_msg(timeout=left)
            except TimeoutError:
                break
            replies.append(parse(msg.data))
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
    return replies


def admin_partitions(replies: Sequence[AdminReply]) -> set[int]:
    """The partitions a list of admin answers covers."""
    return {p for r in replies for p in r.partitions or ()}


def merge_admin_replies(verb: str, replies: Sequence[AdminReply], count: int) -> AdminReply:
    """One answer to an admin verb from the owners of a partitioned index (each did it for its
    partitions; a standby, answering for none, did nothing and is left out). `result` keeps
    every owner's own under `owners`; `forget` adds the union of what was found, `stats` and
    `compact` the sums. A partition no owner answered for makes the answer not ok (a forget or
    compaction is then incomplete: retried, it finishes) except for `stats`, which shows what
    it could gather and names the missing partitions. `rebuild` sums the records and takes the
    slowest owner's time."""
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
    elif verb == "rebuild":
        result.update({k: sum(_int(res.get(k)) for res in results)
                       for k in ("records", "embedded", "unembedded")})
        result["took_s"] = max((float(res.get("took_s") or 0) for res in results  # type: ignore[arg-type]
                                ), default=0.0)
        result["model"] = next((res.get("model") for res in results if res.get("model")), None)
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
        "builds": {f"{tier} (owner {i})": what for i, res in enumerate(results)
                   for tier, what in _dict(res.get("builds")).items()},
    }


def _dict(v: object) -> dict[str, object]:
    return {str(k): x for k, x in v.items()} if isinstance(v, dict) else {}
