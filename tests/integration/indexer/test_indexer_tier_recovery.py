"""A Zvec tier that no longer opens (zvec 0.8 can leave one so when killed inside `optimize()`:
a segment's RocksDB column family is re-created in place) is moved aside, started empty and
re-indexed from Postgres through the embedder; the indexer keeps running meanwhile."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from indexer_it_helpers import MODEL, Harness, make_event, running, unit_vectors, wait_for
from totalrecall_indexer.settings import Settings
from totalrecall_schema import (
    EmbedReply,
    EmbedRequest,
    VectorSearchReply,
    VectorSearchRequest,
)


def break_tier(zvec_dir: Path, tier: str) -> None:
    """The same failure as after the kill: 'Failed to open scalar indexer'."""
    currents = list((zvec_dir / tier).glob("*/scalar.index.*.rocksdb/CURRENT"))
    assert currents
    for c in currents:
        c.unlink()


async def search(h: Harness, vec: np.ndarray) -> list[tuple[str, str, float]]:
    req = VectorSearchRequest(vector=[float(v) for v in vec], model=MODEL, topk=5,
                              tiers=["hot", "warm", "cold"])
    rep = VectorSearchReply.model_validate_json(
        await h.request(h.topology.rpc_vector_search, req, timeout=10))
    assert rep.error is None
    return [(x.key, x.tier, round(x.score, 4)) for x in rep.hits]


async def test_unopenable_tier_is_quarantined_and_reindexed(settings: Settings,
                                                            harness: Harness) -> None:
    settings = settings.model_copy(update={"memory_md_retry_s": 0.3})
    vecs = unit_vectors(90, seed=50)
    events = [make_event(i, vecs[i], age=timedelta(days=(i % 3) * 3, minutes=1))
              for i in range(90)]  # a third hot, the rest warm (3 and 6 days old)
    table = {e.event.embedding_text(): [float(v) for v in vecs[i]] for i, e in enumerate(events)}
    probes = [vecs[i] for i in (0, 1, 4, 40, 89)]  # 0 is hot, the others warm
    async with running(settings) as app:
        await app.indexer.index_batch(events)
        await app.indexer.optimize_once(force=True)
        forgotten = events[4].event.key  # in warm
        assert (await search(harness, probes[2]))[0][0] == forgotten
        await app.indexer.forget([forgotten])
        before = [await search(harness, q) for q in probes]
        docs_before = {t: s["doc_count"] for t, s in app.indexer.tiers.stats().items()}
    assert docs_before["warm"] == 59

    zvec_dir = settings.home / "zvec"
    break_tier(zvec_dir, "warm")
    # restart without an embedder: the tier is quarantined, the service runs degraded
    async with running(settings) as app:
        idx = app.indexer
        assert list(idx.tiers.reindex) == ["warm"]
        assert len(list(zvec_dir.glob("warm.broken-*"))) == 1
        assert idx.tiers.stats()["warm"]["doc_count"] == 0
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as http:
            async def degraded() -> Any:
                body = (await http.get("/health")).json()
                return body["status"] == "degraded" and "error" in body["reindex"]["warm"] \
                    and body

            body = await wait_for(degraded, what="degraded while the embedder is missing")
        assert "unavailable" in body["reindex"]["warm"]["error"]
        # hot still answers
        assert (await search(harness, probes[0]))[0] == before[0][0]
    meta = json.loads((zvec_dir / "meta.json").read_text())
    assert list(meta["reindex"]) == ["warm"]  # survives a restart
    (newest,) = (p.name for p in zvec_dir.glob("warm.broken-*"))
    (zvec_dir / "warm.broken-1").mkdir()  # an older quarantined copy, from an earlier break

    calls: list[int] = []

    async def embedder(msg: Any) -> None:
        req = EmbedRequest.model_validate_json(msg.data)
        calls.append(len(req.texts))
        await msg.respond(EmbedReply(vectors=[table[t] for t in req.texts], model=MODEL,
                                     dim=384).model_dump_json().encode())

    sub = await harness.nc.subscribe(harness.topology.rpc_embed_batch, cb=embedder)
    try:
        async with running(settings) as app:
            idx = app.indexer

            async def healed() -> bool:
                return not idx.tiers.reindex

            await wait_for(healed, what="warm re-indexed")
            assert sum(calls) == 59  # the forgotten memory is not resurrected
            assert {t: s["doc_count"] for t, s in idx.tiers.stats().items()} == docs_before
            assert [await search(harness, q) for q in probes] == before
            st = await idx.stats()
            assert st["reindex"] == {}
            # only the newest quarantined copy is kept once the tier is whole again
            assert [p.name for p in zvec_dir.glob("warm.broken-*")] == [newest]
            assert json.loads((zvec_dir / "meta.json").read_text())["reindex"] == {}
    finally:
        await sub.unsubscribe()


async def test_tier_killed_during_its_creation_is_quarantined(settings: Settings,
                                                              harness: Harness) -> None:
    """A kill inside `create_and_open` leaves LOCK, del.0, idmap.0 and a segment
    folder but no manifest; zvec then raises KeyError('Failed to find the version file') at
    every start. The indexer must start anyway: the tier is moved aside, started empty and
    counted."""
    async with running(settings) as app:
        await app.indexer.index_batch([make_event(0, unit_vectors(1, seed=3)[0])])
    zvec_dir = settings.home / "zvec"
    manifests = list((zvec_dir / "cold").glob("manifest.*"))
    assert manifests
    for m in manifests:
        m.unlink()
    async with running(settings) as app:
        idx = app.indexer
        assert idx.tiers.quarantined == ["cold"]
        assert "version file" in idx.tiers.reindex["cold"]
        assert len(list(zvec_dir.glob("cold.broken-*"))) == 1
        assert idx.tiers.stats()["cold"]["doc_count"] == 0
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as http:
            text = (await http.get("/metrics")).text
        assert 'totalrecall_indexer_zvec_quarantined_total{tier="cold"} 1.0' in text
