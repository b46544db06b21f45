"""Admin verbs against the real stores: stats, compact (tier promotion), forget, rebuild."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import asyncpg
import numpy as np
from indexer_it_helpers import (
    MODEL,
    Harness,
    make_event,
    running,
    unit_vectors,
    wait_for,
)
from totalrecall_indexer.lifecycle.offline_rebuild import rebuild as rebuild_offline
from totalrecall_indexer.settings import Settings
from totalrecall_schema import (
    AdminReply,
    AdminRequest,
    EmbedReply,
    EmbedRequest,
    VectorSearchReply,
    VectorSearchRequest,
)


async def admin(h: Harness, **kw: Any) -> AdminReply:
    return AdminReply.model_validate_json(
        await h.request(h.topology.rpc_index_admin, AdminRequest(**kw), timeout=60))


async def search(h: Harness, vec: np.ndarray, **kw: Any) -> VectorSearchReply:
    req = VectorSearchRequest(vector=[float(v) for v in vec], model=kw.pop("model", MODEL), **kw)
    return VectorSearchReply.model_validate_json(
        await h.request(h.topology.rpc_vector_search, req, timeout=10))


async def rows(dsn: str, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


async def ingest(h: Harness, settings: Settings, events: list[Any]) -> None:
    await h.publish(events)

    async def done() -> bool:
        info = await h.js.consumer_info(h.topology.embedded_stream, h.topology.indexer_durable)
        n = (await rows(settings.pg_dsn, "SELECT count(*) AS n FROM memories"))[0]["n"]
        return n >= len(events) and info.num_pending == 0 and info.num_ack_pending == 0

    await wait_for(done, what=f"{len(events)} events indexed")


async def test_stats_and_compact(settings: Settings, harness: Harness) -> None:
    vecs = unit_vectors(6, seed=5)
    events = [make_event(i, vecs[i]) for i in range(6)]
    async with running(settings) as app:
        idx = app.indexer
        await ingest(harness, settings, events)
        rep = await admin(harness, verb="stats")
        assert rep.ok and rep.result["docs"] == {"hot": 6, "warm": 0, "cold": 0}
        assert rep.result["pg_count"] == 6 and rep.result["model"] == MODEL
        assert 0.0 <= rep.result["index_completeness"]["hot"] <= 1.0
        assert rep.result["builds"] == {}  # six memories are searched exactly: nothing to build

        # nothing is old yet: compact moves nothing
        rep = await admin(harness, verb="compact")
        assert rep.ok and rep.result["moved"] == {"hot->warm": 0, "warm->cold": 0}

        # two days later everything is older than 24 h → warm; 100 days later → cold
        now = int(time.time() * 1000)
        moved = await idx.compact(now_ms=now + 2 * 86_400_000)
        assert moved == {"hot->warm": 6, "warm->cold": 0}
        assert {t: s["doc_count"] for t, s in idx.tiers.stats().items()} == \
            {"hot": 0, "warm": 6, "cold": 0}
        assert {r["tier"] for r in await rows(settings.pg_dsn, "SELECT tier FROM memories")} \
            == {"warm"}
        rep = await search(harness, vecs[2], tiers=["hot", "warm"], topk=3)
        assert rep.hits[0].key == events[2].event.key and rep.hits[0].tier == "warm"
        assert rep.hits[0].score > 0.95  # int8 + refiner keeps the cosine
        assert (await search(harness, vecs[2], tiers=["hot"])).hits == []

        moved = await idx.compact(now_ms=now + 100 * 86_400_000)
        assert moved == {"hot->warm": 0, "warm->cold": 6}
        rep = await search(harness, vecs[3], tiers=["hot", "warm", "cold"], topk=3)
        assert rep.hits[0].key == events[3].event.key and rep.hits[0].tier == "cold"

        # HNSW build on demand
        done = await idx.optimize_once(force=True)
        assert "cold" in done
        assert idx.tiers.stats()["cold"]["index_completeness"] == 1.0
        rep = await search(harness, vecs[3], tiers=["cold"], topk=1)
        assert rep.hits[0].key == events[3].event.key


async def test_duplicate_during_promotion_is_deduped(settings: Settings,
                                                     harness: Harness) -> None:
    vec = unit_vectors(1, seed=6)[0]
    ev = make_event(0, vec)
    async with running(settings) as app:
        await ingest(harness, settings, [ev])
        # simulate a crash between "upsert into warm" and "delete from hot"
        doc = app.indexer.tiers.fetch("hot", [ev.event.key])[ev.event.key]
        app.indexer.tiers.upsert("warm", [doc])
        rep = await search(harness, vec, tiers=["hot", "warm"], topk=5)
        assert [h.key for h in rep.hits] == [ev.event.key]
        assert rep.hits[0].tier == "hot"


async def test_forget(settings: Settings, harness: Harness) -> None:
    vecs = unit_vectors(3, seed=7)
    events = [make_event(i, vecs[i], age=timedelta(days=3 * i)) for i in range(3)]
    async with running(settings) as app:
        await ingest(harness, settings, events)
        gone = [events[0].event.key, events[2].event.key]
        # the namespace guard: nothing of namespace "other" has these keys
        rep = await admin(harness, verb="forget", keys=gone, namespace="other")
        assert rep.ok and rep.result["forgotten"] == 0
        rep = await admin(harness, verb="forget", keys=gone)
        assert rep.ok, rep.error
        assert rep.result["postgres"] == 2 and rep.result["zvec"] == 2
        left = await rows(settings.pg_dsn, "SELECT id FROM memories")
        assert [r["id"] for r in left] == ["ev-1"]
        assert sum(s["doc_count"] for s in app.indexer.tiers.stats().values()) == 1
        texts = "".join(p.read_text() for p in
                        (settings.home / "memory" / "daily").glob("*.md"))
        assert "tr:forgotten" in texts
        assert events[0].event.summary not in texts and events[2].event.summary not in texts
        assert events[1].event.summary in texts
        rep = await search(harness, vecs[0], tiers=["hot", "warm", "cold"], topk=5)
        assert gone[0] not in {h.key for h in rep.hits}
        assert (await admin(harness, verb="forget")).ok is False


async def test_retention_forgets_what_is_older_than_the_cold_tier_keeps(
        settings: Settings, harness: Harness) -> None:
    vecs = unit_vectors(3, seed=8)
    events = [make_event(i, vecs[i], age=timedelta(days=[1, 200, 400][i])) for i in range(3)]
    year = 365 * 86_400.0
    async with running(settings.model_copy(update={"cold_max_age_s": year})) as app:
        await ingest(harness, settings, events)
        moved = await app.indexer.compact()
        assert moved["expired"] == 1  # (each was written straight into its tier by age)
        left = await rows(settings.pg_dsn, "SELECT id, tier FROM memories ORDER BY id")
        assert [(r["id"], r["tier"]) for r in left] == [("ev-0", "warm"), ("ev-1", "cold")]
        assert {t: s["doc_count"] for t, s in app.indexer.tiers.stats().items()} == \
            {"hot": 0, "warm": 1, "cold": 1}
        texts = "".join(p.read_text() for p in (settings.home / "memory" / "daily").glob("*.md"))
        assert events[2].event.summary in texts  # the ground truth keeps it
        assert (await app.indexer.compact())["expired"] == 0


async def _fake_embedder(h: Harness, table: dict[str, list[float]]) -> Any:
    """Answers rpc_embed_batch like the embedder would, from a text → vector table."""
    calls: list[int] = []

    async def cb(msg: Any) -> None:
        req = EmbedRequest.model_validate_json(msg.data)
        calls.append(len(req.texts))
        assert req.kind == "document" and len(req.texts) <= 64
        reply = EmbedReply(vectors=[table[t] for t in req.texts], model=MODEL, dim=384)
        await msg.respond(reply.model_dump_json().encode())

    sub = await h.nc.subscribe(h.topology.rpc_embed_batch, cb=cb)
    return sub, calls


async def test_rebuild_from_markdown_restores_search(settings: Settings,
                                                     harness: Harness) -> None:
    n = 70  # more than one embed request
    vecs = unit_vectors(n, seed=8)
    events = [make_event(i, vecs[i], age=timedelta(hours=i)) for i in range(n)]
    events.append(make_event(n, None, summary="never embedded"))
    table = {e.event.embedding_text(): [float(v) for v in vecs[i]]
             for i, e in enumerate(events[:n])}
    table[events[n].event.embedding_text()] = [float(v) for v in unit_vectors(1, seed=9)[0]]
    probes = [vecs[i] for i in (0, 5, 30, 69)]
    async with running(settings):
        await ingest(harness, settings, events)
        before = [[(h.key, round(h.score, 4)) for h in
                   (await search(harness, q, tiers=["hot", "warm"], topk=5)).hits]
                  for q in probes]
        pg_before = await rows(settings.pg_dsn, "SELECT key, summary, detail, tags, metadata, ts "
                                                "FROM memories ORDER BY key")
        # wipe the derived stores behind the indexer's back, then rebuild from Markdown
        await (await asyncpg.connect(settings.pg_dsn)).execute("DELETE FROM memories")
        sub, calls = await _fake_embedder(harness, table)
        rep = await admin(harness, verb="rebuild")
        await sub.unsubscribe()
        assert rep.ok, rep.error
        assert rep.result["records"] == n + 1 and rep.result["embedded"] == n + 1
        assert sum(calls) == n + 1 and max(calls) <= 64
        new_key = events[n].event.key  # has a vector now, may rank among the neighbours
        after = [[(h.key, round(h.score, 4)) for h in
                  (await search(harness, q, tiers=["hot", "warm"], topk=6)).hits
                  if h.key != new_key][:5]
                 for q in probes]
        assert after == before
        pg_after = await rows(settings.pg_dsn, "SELECT key, summary, detail, tags, metadata, ts "
                                               "FROM memories ORDER BY key")
        assert pg_after == pg_before
        # the formerly unembedded memory got its vector in the rebuild
        assert (await rows(settings.pg_dsn, "SELECT count(*) AS n FROM memories "
                                            "WHERE NOT embedded"))[0]["n"] == 0

        # embedder gone: rebuild still restores Postgres, memories stored unembedded
        rep = await admin(harness, verb="rebuild")
        assert rep.ok and rep.result["embedded"] == 0 and rep.result["unembedded"] == n + 1
        assert (await rows(settings.pg_dsn, "SELECT count(*) AS n FROM memories "
                                            "WHERE NOT embedded"))[0]["n"] == n + 1
        assert (await search(harness, probes[0], model=None)).hits == []


async def test_offline_rebuild_function(settings: Settings, harness: Harness) -> None:
    vecs = unit_vectors(4, seed=10)
    events = [make_event(i, vecs[i]) for i in range(4)]
    table = {e.event.embedding_text(): [float(v) for v in vecs[i]] for i, e in enumerate(events)}
    async with running(settings):
        await ingest(harness, settings, events)
    sub, _calls = await _fake_embedder(harness, table)
    result = await rebuild_offline(settings)
    await sub.unsubscribe()
    assert result["records"] == 4 and result["embedded"] == 4
    async with running(settings) as app:
        assert app.indexer.tiers.stats()["hot"]["doc_count"] == 4
        rep = await search(harness, vecs[1], topk=1)
        assert rep.hits[0].key == events[1].event.key and rep.hits[0].score > 0.99


async def _drained(h: Harness, settings: Settings, marker_id: str) -> None:
    """Every published event handled, the one with `marker_id` (a new one) stored."""
    async def done() -> bool:
        info = await h.js.consumer_info(h.topology.embedded_stream, h.topology.indexer_durable)
        ids = {r["id"] for r in await rows(settings.pg_dsn, "SELECT id FROM memories")}
        return marker_id in ids and info.num_pending == 0 and info.num_ack_pending == 0

    await wait_for(done, what=f"{marker_id} indexed and the consumer drained")


async def test_a_forgotten_memory_never_comes_back(settings: Settings, harness: Harness) -> None:
    """A tombstone keeps it out: a redelivered or backfilled event (another Nats-Msg-Id), one
    still in the pipeline when it was forgotten, a replay after a restart, and a rebuild."""
    vecs = unit_vectors(6, seed=11)
    events = [make_event(i, vecs[i]) for i in range(6)]
    gone, in_flight = events[0], events[1]
    daily = settings.home / "memory" / "daily"

    async def stored_ids() -> set[str]:
        return {r["id"] for r in await rows(settings.pg_dsn, "SELECT id FROM memories")}

    def markdown() -> str:
        return "".join(p.read_text() for p in daily.glob("*.md"))

    async with running(settings):
        await ingest(harness, settings, [gone, events[2]])
        rep = await admin(harness, verb="forget", keys=[gone.event.key, in_flight.event.key],
                          namespace="default")
        assert rep.ok, rep.error
        assert rep.result["forgotten"] == 1 and rep.result["found"] == [gone.event.key]
        # the backfill republishes the same memory with a vector; the in-flight one arrives
        await harness.publish([gone, in_flight], msg_id_suffix=":backfill")
        await harness.publish([events[3]])
        await _drained(harness, settings, "ev-3")
        assert await stored_ids() == {"ev-2", "ev-3"}
        assert gone.event.summary not in markdown() and in_flight.event.summary not in markdown()
    async with running(settings) as app:  # the tombstones are read back at startup
        assert {gone.event.key, in_flight.event.key} <= app.indexer.forgotten
        await harness.publish([gone, in_flight], msg_id_suffix=":replay")
        await harness.publish([events[4]])
        await _drained(harness, settings, "ev-4")
        assert await stored_ids() == {"ev-2", "ev-3", "ev-4"}
        rep = await admin(harness, verb="rebuild")
        assert rep.ok and rep.result["records"] == 3, rep
        assert await stored_ids() == {"ev-2", "ev-3", "ev-4"}
        hits = (await search(harness, vecs[0], tiers=["hot", "warm", "cold"], topk=10)).hits
        assert gone.event.key not in {h.key for h in hits}


async def test_a_rebuild_restores_lost_tombstones_from_the_daily_logs(
        settings: Settings, harness: Harness) -> None:
    """Postgres lost its tombstones: the daily logs' audit lines give them back at a rebuild,
    except for a memory written again after its forget (before tombstones existed: live)."""
    vecs = unit_vectors(6, seed=12)
    events = [make_event(i, vecs[i]) for i in range(6)]
    gone, again = events[0], events[5]

    async def stored_ids() -> set[str]:
        return {r["id"] for r in await rows(settings.pg_dsn, "SELECT id FROM memories")}

    async with running(settings):
        await ingest(harness, settings, [gone, events[1], again])
        rep = await admin(harness, verb="forget", keys=[gone.event.key, again.event.key])
        assert rep.ok and rep.result["forgotten"] == 2, rep
    await (await asyncpg.connect(settings.pg_dsn)).execute("DELETE FROM forgotten")
    async with running(settings) as app:
        assert app.indexer.forgotten == set()
        await harness.publish([again], msg_id_suffix=":again")  # written again, as before
        await harness.publish([events[2]])
        await _drained(harness, settings, "ev-2")
        assert await stored_ids() == {"ev-1", "ev-2", "ev-5"}
        rep = await admin(harness, verb="rebuild")
        assert rep.ok, rep.error
        assert app.indexer.forgotten == {gone.event.key}
        assert [r["key"] for r in await rows(settings.pg_dsn, "SELECT key FROM forgotten")] == \
            [gone.event.key]
        await harness.publish([gone], msg_id_suffix=":replay")
        await harness.publish([events[3]])
        await _drained(harness, settings, "ev-3")
        assert await stored_ids() == {"ev-1", "ev-2", "ev-3", "ev-5"}


async def test_forget_finds_a_record_only_the_daily_log_has(settings: Settings,
                                                            harness: Harness) -> None:
    """A memory Postgres lacks (written to the Markdown while Postgres failed) is searched for
    in every daily file, and removed there too."""
    vecs = unit_vectors(2, seed=13)
    events = [make_event(i, vecs[i], age=timedelta(days=2 * i)) for i in range(2)]
    stray = events[1]
    async with running(settings):
        await ingest(harness, settings, events)
        await (await asyncpg.connect(settings.pg_dsn)).execute(
            f"DELETE FROM memories WHERE key = '{stray.event.key}'")
        rep = await admin(harness, verb="forget", keys=[stray.event.key], namespace="default")
        assert rep.ok and rep.result["found"] == [stray.event.key], rep
        assert rep.result["postgres"] == 0 and sum(rep.result["markdown"].values()) == 1
        texts = "".join(p.read_text() for p in
                        (settings.home / "memory" / "daily").glob("*.md"))
        assert stray.event.summary not in texts and events[0].event.summary in texts
