"""Indexer against real nats-server + Postgres + Zvec: consume → write → ack, search RPC,
idempotent redelivery, dead letters, Postgres outage."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import numpy as np
from indexer_it_helpers import MODEL, Harness, make_event, running, unit_vectors, wait_for
from totalrecall_indexer.settings import Settings
from totalrecall_schema import (
    DeadLetter,
    VectorFilter,
    VectorSearchReply,
    VectorSearchRequest,
)


async def pg_count(dsn: str, where: str = "true") -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(f"SELECT count(*) FROM memories WHERE {where}"))
    finally:
        await conn.close()


async def search(h: Harness, vec: np.ndarray, **kw: Any) -> VectorSearchReply:
    req = VectorSearchRequest(vector=[float(v) for v in vec], model=kw.pop("model", MODEL), **kw)
    return VectorSearchReply.model_validate_json(
        await h.request(h.topology.rpc_vector_search, req, timeout=10))


def md_event_lines(settings: Settings) -> list[str]:
    out = []
    for p in sorted((settings.home / "memory" / "daily").glob("*.md")):
        out += [ln for ln in p.read_text().splitlines() if ln.startswith("<!-- tr:event ")]
    return out


async def test_consume_write_ack_and_search(settings: Settings, harness: Harness) -> None:
    vecs = unit_vectors(12)
    events = [make_event(i, vecs[i], category="error" if i % 2 else "system.service",
                         severity="error" if i % 3 else "info",
                         namespace="other" if i == 11 else "default") for i in range(11)]
    events.append(make_event(11, vecs[11], namespace="other"))
    events.append(make_event(12, None, summary="keyword only memory"))
    async with running(settings) as app:
        idx = app.indexer
        await harness.publish(events)
        await wait_for(lambda: _eq(pg_count(settings.pg_dsn), 13), what="13 rows")
        await wait_for(lambda: _consumer_idle(harness, settings), what="all acked")
        assert await pg_count(settings.pg_dsn, "embedded") == 12
        unembedded = f"NOT embedded AND key = '{events[12].event.key}'"
        assert await pg_count(settings.pg_dsn, unembedded) == 1
        assert idx.tiers.stats()["hot"]["doc_count"] == 12
        assert len(md_event_lines(settings)) == 13

        # tsvector works
        assert await pg_count(settings.pg_dsn,
                              "tsv @@ websearch_to_tsquery('english', 'keyword memory')") == 1

        # nearest neighbour of its own vector, similarity ~1, namespace-isolated
        rep = await search(harness, vecs[4], topk=5)
        assert rep.error is None, rep.error
        assert rep.hits[0].key == events[4].event.key and rep.hits[0].score > 0.99
        assert rep.hits[0].tier == "hot" and rep.hits[0].id == "ev-4"
        assert rep.hits[0].summary == events[4].event.summary
        assert all(h.key != events[11].event.key for h in rep.hits)
        assert "hot" in rep.took_ms and rep.hits == sorted(rep.hits, key=lambda h: -h.score)

        rep = await search(harness, vecs[11], filter=VectorFilter(namespace="other"))
        assert [h.key for h in rep.hits] == [events[11].event.key]

        rep = await search(harness, vecs[4], topk=20,
                           filter=VectorFilter(categories=["error"], severities=["error"]))
        want = {e.event.key for i, e in enumerate(events[:11]) if i % 2 and i % 3}
        assert {h.key for h in rep.hits} == want

        rep = await search(harness, vecs[4], topk=20,
                           filter=VectorFilter(since_ms=events[4].event.ts_ms,
                                               until_ms=events[4].event.ts_ms))
        assert [h.key for h in rep.hits] == [events[4].event.key]

        # a query made with another model never mixes vector spaces
        rep = await search(harness, vecs[4], model="other-model:ffff")
        assert rep.error and "model" in rep.error and not rep.hits
        rep = await search(harness, vecs[4][:10])
        assert rep.error and "dimension" in rep.error

        # metrics and health
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            r = await http.get("/health")
            assert r.status_code == 200 and r.json()["status"] == "ok"
            assert r.json()["docs"]["hot"] == 12
            r = await http.get("/metrics")
            assert "totalrecall_indexer_write_seconds_bucket" in r.text
            assert "totalrecall_indexer_event_to_searchable_seconds_count" in r.text


async def _eq(coro: Any, want: int) -> bool:
    return (await coro) == want


async def test_redelivery_and_restart_create_no_duplicates(settings: Settings,
                                                           harness: Harness) -> None:
    vecs = unit_vectors(3, seed=1)
    events = [make_event(i, vecs[i]) for i in range(3)]
    async with running(settings) as app:
        await harness.publish(events)
        await harness.publish(events, msg_id_suffix="-again")  # bypass JetStream dedup
        await wait_for(lambda: _eq(pg_count(settings.pg_dsn), 3), what="3 rows")
        await wait_for(lambda: _consumer_idle(harness, settings), what="consumer drained")
        assert app.indexer.tiers.stats()["hot"]["doc_count"] == 3
    # restart on the same state and deliver everything again
    async with running(settings) as app:
        await harness.publish(events, msg_id_suffix="-third")
        await wait_for(lambda: _consumer_idle(harness, settings), what="consumer drained")
        assert await pg_count(settings.pg_dsn) == 3
        assert app.indexer.tiers.stats()["hot"]["doc_count"] == 3
        assert len(md_event_lines(settings)) == 3
        rep = await search(harness, vecs[0], topk=10)
        assert [h.key for h in rep.hits].count(events[0].event.key) == 1


async def test_a_long_memory_is_stored_and_blocks_nothing(settings: Settings,
                                                          harness: Harness) -> None:
    """A memory whose tsvector is too big for a btree entry (a long chat turn, a log excerpt)
    goes into its batch like any other: it used to fail the whole batch, again and again."""
    rnd = random.Random(3)
    long_detail = " ".join("".join(rnd.choices("bcdfghjklmnpqrstvwxz", k=9))
                           for _ in range(2000))
    vecs = unit_vectors(3, seed=2)
    events = [make_event(i, vecs[i]) for i in range(3)]
    events[1].event.detail = long_detail
    async with running(settings) as app:
        await harness.publish(events)
        await wait_for(lambda: _eq(pg_count(settings.pg_dsn), 3), what="3 rows")
        await wait_for(lambda: _consumer_idle(harness, settings), what="all acked")
        assert await pg_count(settings.pg_dsn, "NOT tsv_fits") == 1
        assert app.indexer.tiers.stats()["hot"]["doc_count"] == 3
        # and again (the upsert's update path)
        await harness.publish(events, msg_id_suffix="-again")
        await wait_for(lambda: _consumer_idle(harness, settings), what="all acked again")
        assert await pg_count(settings.pg_dsn) == 3


async def _consumer_idle(h: Harness, settings: Settings) -> bool:
    info = await h.js.consumer_info(h.topology.embedded_stream, h.topology.indexer_durable)
    return info.num_pending == 0 and info.num_ack_pending == 0


async def test_invalid_payload_goes_to_dlq(settings: Settings, harness: Harness) -> None:
    topo = harness.topology
    async with running(settings):
        sub = await harness.js.subscribe(topo.dlq_subject("indexer"), stream=topo.dlq_stream)
        await harness.js.publish(topo.embedded_subject("error"), b"{not json")
        await harness.js.publish(topo.embedded_subject("error"),
                                 json.dumps({"event": {"summary": ""}}).encode())
        good = make_event(1, unit_vectors(1)[0])
        await harness.publish([good])
        dls = [DeadLetter.model_validate_json((await sub.next_msg(timeout=10)).data)
               for _ in range(2)]
        assert {d.payload for d in dls} == {"{not json", '{"event": {"summary": ""}}'}
        assert all(d.stage == "indexer" and "invalid" in d.reason for d in dls)
        await wait_for(lambda: _eq(pg_count(settings.pg_dsn), 1), what="good event indexed")
        await wait_for(lambda: _consumer_idle(harness, settings), what="all acked")


async def test_postgres_down_naks_then_recovers(settings: Settings, harness: Harness) -> None:
    async with running(settings) as app:
        idx = app.indexer
        await idx.pg.close()  # Postgres "goes away": upserts fail
        ev = make_event(1, unit_vectors(1)[0])
        await harness.publish([ev])

        async def redelivered() -> bool:
            info = await harness.js.consumer_info(harness.topology.embedded_stream,
                                                  harness.topology.indexer_durable)
            return info.num_redelivered >= 1

        await wait_for(redelivered, what="nak and redelivery")
        assert await pg_count(settings.pg_dsn) == 0
        dlq = await harness.js.stream_info(harness.topology.dlq_stream)
        assert dlq.state.messages == 0
        await idx.pg.start()  # Postgres is back
        await wait_for(lambda: _eq(pg_count(settings.pg_dsn), 1), what="indexed after recovery")
        await wait_for(lambda: _consumer_idle(harness, settings), what="acked")
        assert idx.tiers.stats()["hot"]["doc_count"] == 1
        assert len(md_event_lines(settings)) == 1


async def test_old_events_land_in_their_tier(settings: Settings, harness: Harness) -> None:
    vecs = unit_vectors(3, seed=3)
    events = [make_event(0, vecs[0]), make_event(1, vecs[1], age=timedelta(days=3)),
              make_event(2, vecs[2], age=timedelta(days=200))]
    async with running(settings) as app:
        await harness.publish(events)
        await wait_for(lambda: _eq(pg_count(settings.pg_dsn), 3), what="3 rows")
        await wait_for(lambda: _consumer_idle(harness, settings), what="all acked")
        st = app.indexer.tiers.stats()
        assert {t: s["doc_count"] for t, s in st.items()} == {"hot": 1, "warm": 1, "cold": 1}
        assert await pg_count(settings.pg_dsn, "tier = 'cold'") == 1
        for i, tier in enumerate(("hot", "warm", "cold")):
            rep = await search(harness, vecs[i], tiers=["hot", "warm", "cold"], topk=3)
            assert rep.hits[0].key == events[i].event.key and rep.hits[0].tier == tier
            assert rep.hits[0].score > 0.95
            assert set(rep.took_ms) >= {"hot", "warm", "cold"}


async def test_first_vectors_fix_dim_and_model(settings: Settings, harness: Harness) -> None:
    from totalrecall_schema import EmbeddedEvent

    rng = np.random.default_rng(4)
    small = rng.normal(size=(2, 64)).astype(np.float32)
    small /= np.linalg.norm(small, axis=1, keepdims=True)
    first = make_event(0, None)
    first = EmbeddedEvent(event=first.event, vector=[float(v) for v in small[0]], model="m64:1")
    other = make_event(1, None)
    other = EmbeddedEvent(event=other.event, vector=[float(v) for v in small[1]],
                          model="another-model:2")
    async with running(settings) as app:
        await harness.publish([first])
        await wait_for(lambda: _consumer_idle(harness, settings), what="first acked")
        await wait_for(lambda: _eq(pg_count(settings.pg_dsn), 1), what="first row")
        assert (app.indexer.tiers.dim, app.indexer.tiers.model) == (64, "m64:1")
        await harness.publish([other])  # another vector space: kept keyword-only
        await wait_for(lambda: _eq(pg_count(settings.pg_dsn), 2), what="second row")
        await wait_for(lambda: _consumer_idle(harness, settings), what="second acked")
        assert await pg_count(settings.pg_dsn, "embedded") == 1
        assert app.indexer.tiers.stats()["hot"]["doc_count"] == 1
        rep = await search(harness, small[0], model="m64:1")
        assert rep.error is None and rep.hits[0].key == first.event.key
