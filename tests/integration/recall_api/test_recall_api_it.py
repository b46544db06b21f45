"""recall-api against a real nats-server and a real Postgres (no embedder/indexer processes:
where the vector path is exercised, the RPC subjects are answered by stand-ins on the real NATS).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import nats
import pytest
import uvicorn
from totalrecall.infra import free_port
from totalrecall_recall_api.app import create_app
from totalrecall_recall_api.settings import Settings
from totalrecall_schema import (
    EmbedReply,
    EmbedRequest,
    MemoryEvent,
    Topology,
    VectorHit,
    VectorSearchReply,
    VectorSearchRequest,
    memory_key,
)
from totalrecall_schema.templates import template_hash
from waiting import wait_for

NOW = datetime.now(UTC)

async def create_memories_table(dsn: str) -> None:
    """The indexer's schema, by its own migrations (the indexer owns the table)."""
    from totalrecall_indexer.adapters.pg_schema import migrate

    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()


async def insert_rows(dsn: str, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Insert memories the way the indexer would; returns id → key."""
    conn = await asyncpg.connect(dsn)
    keys: dict[str, str] = {}
    try:
        for r in rows:
            ns = r.get("namespace", "default")
            key = memory_key(ns, r["id"])
            keys[r["id"]] = key
            await conn.execute(
                """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor,
                       source, severity, tags, summary, detail, metadata, tier, template)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::jsonb, $14,
                           $15)""",
                key, r["id"], ns, r.get("ts") or datetime.now(UTC) - r.get("age", timedelta(minutes=10)),
                r.get("category", "conversation"), r.get("subcategory", "general"),
                r.get("actor", "system"), r.get("source", "test"), r.get("severity", "info"),
                r.get("tags", []), r["summary"], r.get("detail", ""),
                json.dumps({"severity": r.get("severity", "info"), "tags": r.get("tags", []),
                            **r.get("metadata", {})}),
                r.get("tier", "hot"), template_hash(r["summary"]))
    finally:
        await conn.close()
    return keys


@pytest.fixture
def settings(nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path) -> Settings:
    return Settings(nats_url=nats_url, pg_dsn=pg_dsn, subject_prefix=topology.prefix,
                    stream_prefix=topology.stream_prefix, memory_dir=tr_home / "memory",
                    embed_timeout_s=2.0, search_timeout_s=2.0)


@asynccontextmanager
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its real lifespan (NATS + Postgres), driven in-process."""
    app = create_app(settings)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://recall", timeout=30) as c:
        yield c


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[Any]:
    client = await nats.connect(nats_url)
    yield client
    await client.close()


# --- ingest ------------------------------------------------------------------------------------
async def test_ingest_is_durable_with_msg_id_and_dedups(settings: Settings, topology: Topology,
                                                         nc: Any) -> None:
    js = nc.jetstream()
    subject = topology.events_subject("system.service")
    async with api(settings) as c:
        r = await c.post("/memory/ingest", json={
            "summary": "nginx failed: port 80 already in use", "id": "evt-1",
            "category": "system.service", "tags": ["nginx", "port"], "namespace": "ns1"})
        assert r.status_code == 200, r.text
        assert r.json() == {"ids": ["evt-1"], "accepted": 1, "duplicates": 0, "derived": []}

        # The PubAck was awaited before answering: the message is in the stream now.
        msg = await js.get_last_msg(topology.events_stream, subject)
        assert msg.headers["Nats-Msg-Id"] == memory_key("ns1", "evt-1")
        ev = MemoryEvent.model_validate_json(msg.data)
        assert (ev.id, ev.namespace, ev.category, ev.metadata.tags) == (
            "evt-1", "ns1", "system.service", ["nginx", "port"])

        again = await c.post("/memory/ingest", json={
            "summary": "nginx failed: port 80 already in use", "id": "evt-1",
            "category": "system.service", "namespace": "ns1"})
        assert again.json()["duplicates"] == 1
        assert (await js.stream_info(topology.events_stream)).state.messages == 1

        batch = await c.post("/memory/ingest", json=[
            {"summary": f"event {i}", "category": "system.process"} for i in range(3)])
        assert batch.json()["accepted"] == 3 and len(set(batch.json()["ids"])) == 3
        assert (await js.stream_info(topology.events_stream)).state.messages == 4

        stored = await c.post("/memory/store", json={"summary": "User prefers podman over docker"})
        sid = stored.json()["ids"][0]
        msg = await js.get_last_msg(topology.events_stream, topology.events_subject("conversation"))
        ev = MemoryEvent.model_validate_json(msg.data)
        assert (ev.id, ev.actor, ev.subcategory) == (sid, "agent", "note")

        flush = {"sessionId": "sess-9", "messages": [
            {"role": "user", "content": "Remember: the staging database listens on port 6543"},
            {"role": "assistant", "content": "Noted, staging DB on port 6543."}]}
        first = (await c.post("/memory/flush", json=flush)).json()
        second = (await c.post("/memory/flush", json=flush)).json()
        assert first["accepted"] == 2 and second["ids"] == first["ids"]
        assert second["duplicates"] == 2
        assert (await js.stream_info(topology.events_stream)).state.messages == 7

        bad = await c.post("/memory/ingest", json={"summary": "x", "category": "nope"})
        assert bad.status_code == 422 and "unknown category" in bad.json()["detail"]
        metrics = (await c.get("/metrics")).text
        assert 'totalrecall_recall_ingested_events_total{category="system.process"} 3.0' in metrics


# --- recall ------------------------------------------------------------------------------------
ROWS = [
    {"id": "nginx", "summary": "nginx.service failed: bind to port 80 already in use",
     "category": "system.service", "severity": "error", "age": timedelta(minutes=3)},
    {"id": "disk", "summary": "/home at 93% capacity, 4 GB remaining",
     "category": "system.storage", "severity": "warning", "age": timedelta(hours=2)},
    {"id": "vim", "summary": "User prefers neovim for editing Python", "category": "user_pattern",
     "age": timedelta(days=3)},
    {"id": "other-ns", "namespace": "elsewhere",
     "summary": "nginx.service failed: bind to port 80 already in use",
     "category": "system.service", "severity": "error"},
    {"id": "old", "summary": "Installed nginx 1.24 from nixpkgs", "category": "system.package",
     "age": timedelta(days=40), "tier": "warm"},
]


async def test_recall_keyword_path_without_embedder_or_indexer(settings: Settings,
                                                               pg_dsn: str) -> None:
    await create_memories_table(pg_dsn)
    await insert_rows(pg_dsn, ROWS)
    async with api(settings) as c:
        r = await c.post("/memory/recall", json={"query": "nginx port 80 problem", "maxResults": 3})
        assert r.status_code == 200, r.text
        body = r.json()
        ids = [m["id"] for m in body["memories"]]
        assert ids[0] == "nginx" and "other-ns" not in ids
        assert all(m["namespace"] == "default" for m in body["memories"])
        block = body["system_memory"]
        assert block.startswith("<system_memory>") and block.endswith("</system_memory>")
        assert "[3 minutes ago] (system.service, error) nginx.service failed" in block

        # "nginx" reaches the lexeme `nginx.service` (prefix match), with nothing else to go on.
        unit = (await c.post("/memory/recall", json={"query": "nginx",
                                                      "category": "system.service"})).json()
        assert [m["id"] for m in unit["memories"]] == ["nginx"]

        # Other namespace: only its own memory.
        other = (await c.post("/memory/recall", json={"query": "nginx port", "namespace":
                                                       "elsewhere"})).json()
        assert [m["id"] for m in other["memories"]] == ["other-ns"]

        # A timeframe excludes older memories; "all" includes them.
        recent = (await c.post("/memory/recall", json={"query": "installed nginx",
                                                        "timeframe": "7d"})).json()
        assert "old" not in [m["id"] for m in recent["memories"]]
        everything = (await c.post("/memory/recall", json={"query": "installed nginx",
                                                            "timeframe": "all"})).json()
        assert "old" in [m["id"] for m in everything["memories"]]

        # Greetings recall nothing.
        hi = (await c.post("/memory/recall", json={"query": "hello!"})).json()
        assert hi["memories"] == [] and hi["system_memory"] == ""

        metrics = (await c.get("/metrics")).text
        assert 'totalrecall_recall_degraded_total{component="vector"}' in metrics
        assert 'totalrecall_recall_stage_seconds_count{stage="bm25"}' in metrics


async def test_recall_hybrid_through_the_rpc_subjects(settings: Settings, pg_dsn: str,
                                                      topology: Topology, nc: Any) -> None:
    """Stand-ins answer the embed and vector-search RPCs; the request payloads are checked."""
    await create_memories_table(pg_dsn)
    keys = await insert_rows(pg_dsn, [
        *ROWS,
        {"id": "semantic", "summary": "Chrome renderer ate 3.8GB RAM, swap at 94%",
         "category": "system.process", "severity": "warning", "age": timedelta(minutes=20)}])
    embeds: list[EmbedRequest] = []
    searches: list[VectorSearchRequest] = []

    async def embed(msg: Any) -> None:
        embeds.append(EmbedRequest.model_validate_json(msg.data))
        await msg.respond(EmbedReply(vectors=[[0.6, 0.8]], model="stub:1", dim=2).model_dump_json()
                          .encode())

    async def search(msg: Any) -> None:
        req = VectorSearchRequest.model_validate_json(msg.data)
        searches.append(req)
        hits = []
        if req.tiers == ["hot"] and req.filter.namespace == "default":
            hits = [VectorHit(key=keys["semantic"], id="semantic", score=0.82, tier="hot",
                              timestamp_ms=int((NOW - timedelta(minutes=20)).timestamp() * 1000),
                              category="system.process", summary="Chrome renderer ate 3.8GB RAM")]
        await msg.respond(VectorSearchReply(hits=hits, took_ms={t: 1.0 for t in req.tiers})
                          .model_dump_json().encode())

    await nc.subscribe(topology.rpc_embed_query, cb=embed)
    await nc.subscribe(topology.rpc_vector_search, cb=search)
    await nc.flush()
    async with api(settings) as c:
        body = (await c.post("/memory/recall", json={
            "query": "what is eating my memory and why did nginx fail?",
            "maxResults": 4, "category": None})).json()
        ids = [m["id"] for m in body["memories"]]
        assert "semantic" in ids and "nginx" in ids  # one from each side of the fusion
        semantic = next(m for m in body["memories"] if m["id"] == "semantic")
        assert semantic["tier"] == "hot" and semantic["metadata"]["_scores"]["vector"] == 0.82
        assert embeds[-1].texts == ["what is eating my memory and why did nginx fail?"]
        assert embeds[-1].kind == "query"
        # auto: hot first, then warm + cold because fewer than 3 good matches came back.
        assert [s.tiers for s in searches] == [["hot"], ["warm", "cold"]]
        assert searches[0].vector == [0.6, 0.8] and searches[0].model == "stub:1"
        assert searches[0].filter.namespace == "default"

        searches.clear()
        await c.post("/memory/recall", json={"query": "nginx errors", "namespace": "elsewhere",
                                             "timeframe": "24h", "category": "system.service"})
        req = searches[-1]
        assert req.filter.namespace == "elsewhere" and req.filter.categories == ["system.service"]
        assert req.filter.since_ms is not None and req.tiers == ["hot"]
        metrics = (await c.get("/metrics")).text
        for stage in ("embed", "vector_hot", "vector_warm", "bm25", "fusion", "mmr", "total"):
            assert f'totalrecall_recall_stage_seconds_count{{stage="{stage}"}}' in metrics


# --- the other endpoints -----------------------------------------------------------------------
async def test_timeline_stats_health_and_file(settings: Settings, pg_dsn: str,
                                              tr_home: Path) -> None:
    await create_memories_table(pg_dsn)
    await insert_rows(pg_dsn, ROWS)
    (tr_home / "memory" / "daily").mkdir(parents=True)
    (tr_home / "memory" / "MEMORY.md").write_text("# Evergreen\n- prefers podman\n")
    async with api(settings) as c:
        tl = (await c.post("/memory/timeline", json={"hours": 24})).json()["memories"]
        assert [m["id"] for m in tl] == ["disk", "nginx"]  # chronological, namespace default
        tl = (await c.post("/memory/timeline", json={"hours": 24 * 7, "category":
                                                      "user_pattern"})).json()["memories"]
        assert [m["id"] for m in tl] == ["vim"]

        stats = (await c.get("/memory/stats")).json()
        assert stats["total"] == 5 and stats["by_category"]["system.service"] == 2
        assert stats["by_tier"] == {"hot": 4, "warm": 1}
        assert "error" in stats["index"]  # no indexer answering: reported, not failed
        # The word counts keyword search weighs by: 5 memories, too few for a namespace's own.
        assert stats["keyword_statistics"]["memories"] == 5
        assert stats["keyword_statistics"]["scope"] == "all"

        health = await c.get("/memory/health")
        assert health.status_code == 200  # nats + postgres up
        assert health.json()["status"] == "degraded"  # no embedder / indexer
        assert health.json()["checks"]["postgres"]["ok"] is True

        f = (await c.post("/memory/file", json={"path": "MEMORY.md"})).json()
        assert f == {"path": "MEMORY.md", "text": "# Evergreen\n- prefers podman\n"}
        assert (await c.post("/memory/file", json={"path": "daily/2020-01-01.md"})).json() == {
            "path": "daily/2020-01-01.md", "text": ""}
        assert (await c.post("/memory/file", json={"path": "../../etc/passwd"})).status_code == 400
        assert (await c.post("/memory/file", json={"path": "/etc/passwd"})).status_code == 400

        compact = await c.post("/memory/compact", json={})
        assert compact.status_code == 503  # the indexer is not running
        warm = (await c.post("/memory/warm", json={"sessionId": "s"})).json()
        assert warm["warmed"]["postgres"] is True and warm["warmed"]["embedder"] is False


# --- auth over real HTTP -----------------------------------------------------------------------
async def test_bearer_token_over_real_http(settings: Settings, pg_dsn: str) -> None:
    await create_memories_table(pg_dsn)
    port = free_port()
    tokened = settings.model_copy(update={"api_token": "it-token-42", "http_port": port})
    server = uvicorn.Server(uvicorn.Config(create_app(tokened), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    try:
        await wait_for(lambda: server.started, timeout=20, what="uvicorn to start")
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as c:
            q = {"query": "nginx"}
            assert (await c.post("/memory/recall", json=q)).status_code == 401
            wrong = {"Authorization": "Bearer nope"}
            assert (await c.post("/memory/recall", json=q, headers=wrong)).status_code == 401
            assert (await c.get("/memory/stats")).status_code == 401
            assert (await c.post("/memory/ingest", json={"summary": "x"})).status_code == 401
            right = {"Authorization": "Bearer it-token-42"}
            assert (await c.post("/memory/recall", json=q, headers=right)).status_code == 200
            # Probes stay open but learn only the status.
            open_health = await c.get("/memory/health")
            assert open_health.status_code == 200 and "checks" not in open_health.json()
            assert "checks" in (await c.get("/memory/health", headers=right)).json()
            assert (await c.get("/health")).status_code == 200
            assert (await c.get("/metrics")).status_code == 200
            assert (await c.get("/openapi.json")).status_code == 200
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


def test_refuses_to_start_off_loopback_without_token(tr_home: Path) -> None:
    env = {**os.environ, "TR_RECALL_HTTP_HOST": "0.0.0.0", "TR_RECALL_HTTP_PORT": str(free_port())}
    env.pop("TR_RECALL_API_TOKEN", None)
    proc = subprocess.run([sys.executable, "-m", "totalrecall_recall_api"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "TR_RECALL_API_TOKEN" in proc.stderr


async def test_neighbours_follow_the_thread_and_the_filters(pg_dsn: str) -> None:
    """Neighbour expansion's lookup on the real schema: same session for conversations, same
    source + service for machine events, nothing across namespaces, categories or the gap."""
    from totalrecall_recall_api.adapters import PostgresStore

    await create_memories_table(pg_dsn)
    t0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

    def turn(i: int, session: str, ns: str = "nb") -> dict[str, Any]:
        return {"id": f"{ns}{session}-{i}".removeprefix("nb"), "namespace": ns, "summary": f"turn {i} of {session}",
                "ts": t0 + timedelta(seconds=i), "metadata": {"session": session}}

    rows = [turn(i, "s1") for i in range(5)] + [turn(i, "s2") for i in range(5, 8)]
    rows += [turn(i, "s1", ns="nb-other") for i in (1, 3)]  # same session id, other namespace
    svc = [("a", "nginx", 0), ("b", "sshd", 1), ("c", "nginx", 2), ("d", "nginx", 1800)]
    rows += [{"id": f"ev-{n}", "namespace": "nb", "summary": f"{unit} event", "source": "journald",
              "category": "system.service", "ts": t0 + timedelta(days=1, seconds=s),
              "metadata": {"service": unit}} for n, unit, s in svc]
    keys = await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool)
        found = await store.neighbours([keys["s1-2"], keys["s2-5"], keys["ev-a"]], 2, 3600.0,
                                       event_gap_s=600.0)
        ids = {hit: [m.id for _, m in got] for hit, got in found.items()}
        assert ids[keys["s1-2"]] == ["s1-1", "s1-0", "s1-3", "s1-4"]  # nearest first, each side
        assert ids[keys["s2-5"]] == ["s2-6", "s2-7"]  # the session starts here: nothing before
        assert ids[keys["ev-a"]] == ["ev-c"]  # not sshd's event, not nginx's 30 minutes later
        assert await store.neighbours([keys["s1-2"]], 1, 3600.0, category="system.service") == {}
        # rows the caller holds come back as their key alone
        light = await store.neighbours([keys["s1-2"]], 2, 3600.0, known=[keys["s1-1"]])
        got = {m.id if m else k: m is None for k, m in light[keys["s1-2"]]}
        assert got == {keys["s1-1"]: True, "s1-0": False, "s1-3": False, "s1-4": False}
    finally:
        await pool.close()


async def test_recent_merges_the_newest_of_each_category(pg_dsn: str) -> None:
    """The diagnostic lookup (`recent` with categories): the newest rows across the categories,
    newest first, at most `limit`, within the window, nothing of another category or namespace."""
    from totalrecall_recall_api.adapters import PostgresStore

    await create_memories_table(pg_dsn)
    t0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    cats = ["system.service", "system.process", "conversation"]
    rows = [{"id": f"r{i}", "namespace": "rc", "category": cats[i % 3], "summary": f"event {i}",
             "ts": t0 + timedelta(minutes=i)} for i in range(30)]
    rows += [{"id": "other", "namespace": "rc-other", "category": "system.service",
              "summary": "elsewhere", "ts": t0 + timedelta(hours=1)}]
    await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool)
        got = await store.recent("rc", None, None, 5, ["system.service", "system.process"])
        assert [m.id for m in got] == ["r28", "r27", "r25", "r24", "r22"]
        since = await store.recent("rc", t0 + timedelta(minutes=25), None, 10,
                                   ["system.service", "system.process"])
        assert [m.id for m in since] == ["r28", "r27", "r25"]
        one = await store.recent("rc", None, "system.process", 2, ["system.service", "system.process"])
        assert [m.id for m in one] == ["r28", "r25"]
        plain = await store.recent("rc", None, "conversation", 2)
        assert [m.id for m in plain] == ["r29", "r26"]
        # the same rows for ranking, each its `Memory` when asked
        as_rows = await store.recent_rows("rc", None, None, 5, ["system.service", "system.process"])
        assert [r.memory() for r in as_rows] == got
    finally:
        await pool.close()


async def test_a_new_connection_has_a_recalls_statements_ready_before_one_needs_them(
        pg_dsn: str) -> None:
    """Each pool's connections run a recall's statements as they open (`adapters/warm.py`):
    a recall's first lookups on them prepare nothing more, and a store whose tables the indexer
    has not created yet still gets its pool."""
    import functools

    from totalrecall_recall_api.adapters import GENERIC_PLANS, PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats
    from totalrecall_recall_api.adapters.warm import warm
    from totalrecall_recall_api.recall.service import SYSTEM_CATEGORIES

    def pool(generic: bool) -> Any:
        return asyncpg.create_pool(
            pg_dsn, min_size=1, max_size=1, server_settings=GENERIC_PLANS if generic else None,
            init=functools.partial(warm, generic=generic, categories=SYSTEM_CATEGORIES,
                                   prefix_min_chars=4, timeout=5.0))

    # Before the indexer's migrations: no table, the pool opens all the same.
    early = await pool(generic=False)
    assert await early.fetchval("SELECT 1") == 1
    await early.close()

    await create_memories_table(pg_dsn)
    keys = await insert_rows(pg_dsn, [
        {"id": f"w{i}", "namespace": "wu", "category": "system.service",
         "summary": f"nginx.service failed: port {8000 + i} in use",
         "ts": datetime(2026, 11, 28, 9, i, tzinfo=UTC)} for i in range(5)])
    custom, generic = await pool(generic=False), await pool(generic=True)

    async def prepared(p: Any) -> list[str]:
        return [r["statement"] for r in await p.fetch("SELECT statement FROM pg_prepared_statements")]

    try:
        warm_custom, warm_generic = await prepared(custom), await prepared(generic)
        assert any("to_tsvector" in s for s in warm_custom)  # the words' lexemes
        assert any("term_stats" in s for s in warm_custom)  # their counts
        assert any("key = ANY($1::text[])" in s for s in warm_generic)  # rows by key
        assert any("UNION ALL" in s and "category = 'system.service'" in s
                   for s in warm_generic)  # diagnostic
        assert any("WITH h AS" in s for s in warm_generic)  # neighbours
        assert any("AS t(template)" in s for s in warm_generic)  # repeats
        store = PostgresStore(custom, TermStats(custom), generic_pool=generic)
        found = await store.recent("wu", None, None, 3, list(SYSTEM_CATEGORIES))
        assert [m.id for m in found] == ["w4", "w3", "w2"]
        hits = await store.bm25_rows(["nginx"], "wu", None, None, 5)
        assert len(hits) == 5
        some = [keys["w0"], keys["w1"]]
        assert set(await store.rows(some)) == set(some)
        await store.neighbours(some, 1, 3600.0, known=some)
        await store.newest_of_templates("wu", ["x"], None, None, None, 2)
        # The lookups whose statements do not depend on the question prepared nothing new.
        assert await prepared(generic) == warm_generic
    finally:
        await custom.close()
        await generic.close()


async def test_bm25_returns_its_rows_and_caches_lexemes(pg_dsn: str) -> None:
    """The keyword search hands back each hit's row (so fusion fetches only vector-only rows),
    ranked exactly as `bm25`; a repeated question's lexemes come from the cache."""
    from totalrecall_recall_api.adapters import PostgresStore

    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 2, 1, 9, 0, tzinfo=UTC)
    keys = await insert_rows(pg_dsn, [
        {"id": f"bmr-{i}", "namespace": "bmrows", "summary": s, "detail": d,
         "ts": t0 + timedelta(minutes=i), "metadata": {"service": "nginx"}}
        for i, (s, d) in enumerate([("nginx.service failed: exit code 1", "address in use"),
                                    ("nginx reloaded", ""), ("disk at 91% capacity", "")])])
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool)
        found = await store.bm25_rows(["nginx", "failed"], "bmrows", None, None, 10)
        assert [k for k, _, _ in found] == [keys["bmr-0"], keys["bmr-1"]]
        assert found[0][1] > found[1][1]
        m = found[0][2]
        assert (m.id, m.namespace, m.summary, m.detail) == (
            "bmr-0", "bmrows", "nginx.service failed: exit code 1", "address in use")
        assert m.metadata["service"] == "nginx"
        # the row becomes a `Memory` when asked (recall asks for the memories it returns)
        full = m.memory()
        assert (full.id, full.namespace, full.summary, full.detail, full.timestamp, full.tier) \
            == ("bmr-0", "bmrows", m.summary, m.detail, m.timestamp, "hot")
        assert full.metadata == m.metadata and full is not m.memory()
        assert await store.bm25(["nginx", "failed"], "bmrows", None, None, 10) == \
            [(k, r) for k, r, _ in found]
        assert list(store._lexeme_cache) == ["nginx failed"]
    finally:
        await pool.close()


async def test_bm25_finds_a_rare_word_behind_many_recent_common_matches(pg_dsn: str) -> None:
    """Only the `scan_cap` newest matches are ranked; the matches of the query's rare words are
    looked up on their own, so an old memory with the telling word is not crowded out."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats

    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
    rows = [{"id": "panic", "namespace": "crowd", "summary": "nginx worker hit a kernel panic",
             "ts": t0}]
    rows += [{"id": f"restart-{i}", "namespace": "crowd", "summary": f"nginx restarted ({i})",
              "ts": t0 + timedelta(hours=1, minutes=i)} for i in range(60)]
    keys = await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        ts = TermStats(pool)
        crowded, _, _ = await PostgresStore(pool, term_stats=ts, scan_cap=20)._weighted(
            ["nginx", "panic"], "crowd")
        assert {lx for lx, _ in crowded} == {"nginx", "panic"}
        found = await PostgresStore(pool, term_stats=ts, scan_cap=20).bm25_rows(
            ["nginx", "panic"], "crowd", None, None, 5)
        assert found[0][0] == keys["panic"]  # the only memory with both words, and the oldest
        assert len(found) == 5
        # without the statistics there is no telling which word is rare: the newest 20 only
        blind = await PostgresStore(pool, scan_cap=20).bm25_rows(["nginx", "panic"], "crowd",
                                                                 None, None, 30)
        assert keys["panic"] not in {k for k, _, _ in blind} and len(blind) == 20
    finally:
        await pool.close()


async def test_a_word_newer_than_the_statistics_is_looked_up_not_crowded_out(pg_dsn: str) -> None:
    """A word's counts are reused for a while (`max_age_s`); an identifier logged since has no
    count there. Beside a common word of the question (whose newest matches are walked), it is
    still looked up on its own: the memory holding it is found however old its timestamp."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats

    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
    await insert_rows(pg_dsn, [{"id": f"restart-{i}", "namespace": "stale", "ts":
                                t0 + timedelta(hours=1, minutes=i),
                                "summary": f"nginx restarted ({i})"} for i in range(60)])
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        ts = TermStats(pool, max_age_s=3600)
        await PostgresStore(pool, term_stats=ts)._weighted(["nginx", "panic"], "stale")
        # logged after the counts were read, with the timestamp of its own (older) line
        keys = await insert_rows(pg_dsn, [{"id": "panic", "namespace": "stale", "ts": t0,
                                           "summary": "nginx worker hit a kernel panic"}])
        found = await PostgresStore(pool, term_stats=ts, scan_cap=20).bm25_rows(
            ["nginx", "panic"], "stale", None, None, 5)
        assert found[0][0] == keys["panic"]
    finally:
        await pool.close()


async def test_a_rare_word_is_not_crowded_out_by_a_word_the_statistics_under_count(
        pg_dsn: str) -> None:
    """Counts read before a namespace arrived (another namespace's few memories), and reused:
    every word of a question about it counts as rare, the common one too. The identifier is still
    looked up on its own, so the oldest line holding it is found behind hundreds of newer
    lines sharing the common word (the CI failure of tests/e2e/test_log_memory.py)."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats
    from totalrecall_recall_api.core.text import query_terms

    await create_memories_table(pg_dsn)
    t0 = datetime(2008, 11, 9, 20, 0, tzinfo=UTC)
    await insert_rows(pg_dsn, [{"id": f"note-{i}", "namespace": "other", "ts": t0,
                                "summary": f"a note about nginx {i}"} for i in range(5)])
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        ts = TermStats(pool, max_age_s=3600)
        question = query_terms("what happened to block blk_38865049064139660?")
        store = PostgresStore(pool, term_stats=ts, scan_cap=20)
        await store._weighted(question, "log")  # asked before its lines arrived
        keys = await insert_rows(pg_dsn, [
            {"id": "first", "namespace": "log", "ts": t0,
             "summary": "PacketResponder 1 for block blk_38865049064139660 terminating"},
            *({"id": f"n-{i}", "namespace": "log", "ts": t0 + timedelta(minutes=i + 1),
               "summary": f"PacketResponder {i % 3} for block blk_{i * 7919} terminating"}
              for i in range(120))])
        found = await store.bm25_rows(question, "log", None, None, 5)
        assert found and found[0][0] == keys["first"], found[:3]
    finally:
        await pool.close()


@pytest.mark.parametrize(("question", "wanted"), [
    ("what happened to blk_-6952295868487656571?", "resp"),    # a negative block id, whole
    ("who connected from 10.250.10.6?", "recv"),               # an IP written /ip:port
    ("is partition rdd_42_18 found?", "rdd"),                  # split in three by the parser
    ("what stage was task 28.0 in?", "task"),                  # a decimal the words split
])
async def test_an_identifier_in_the_question_finds_its_line_in_a_new_store(
        pg_dsn: str, question: str, wanted: str) -> None:
    """Asked right after a log was loaded into a new store (no word statistics yet), behind
    many newer lines sharing its words, a line is found by its identifier."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats
    from totalrecall_recall_api.core.text import query_terms

    await create_memories_table(pg_dsn)
    t0 = datetime(2008, 11, 9, 20, 0, tzinfo=UTC)
    lines = {"resp": "PacketResponder 1 for block blk_-6952295868487656571 terminating",
             "recv": "Receiving block blk_-1608999687919862906 src: /10.250.10.6:40524",
             "rdd": "Partition rdd_42_18 not found, computing it",
             "task": "Finished task 28.0 in stage 29.0 (TID 1348)"}
    rows = [{"id": k, "namespace": "log", "summary": v, "ts": t0} for k, v in lines.items()]
    # The newer lines share the words, never the identifier (task 100.0 and up: "task 28.0" in
    # one of them would be a second line the question fits, the newer one).
    rows += [{"id": f"n-{i}", "namespace": "log", "ts": t0 + timedelta(minutes=i + 1),
              "summary": f"PacketResponder {i % 3} for block blk_{i * 7919} terminating; "
                         f"Finished task {i + 100}.0 in stage {i % 9}.0, partition rdd_{i}_4 "
                         f"found from /10.250.{i % 250}.{i % 7}:50010"} for i in range(60)]
    keys = await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool, term_stats=TermStats(pool), scan_cap=20)
        found = await store.bm25_rows(query_terms(question), "log", None, None, 5)
        assert found and found[0][0] == keys[wanted], [(m.id, round(r, 4)) for _, r, m in found]
    finally:
        await pool.close()


async def test_of_matches_that_score_alike_the_newest_take_the_places(pg_dsn: str) -> None:
    """A unit that failed the same way forty times: the keyword search's places go to the
    newest of those equal matches, newest first, not to whichever the grouping met first."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats
    from totalrecall_recall_api.core.text import query_terms

    await create_memories_table(pg_dsn)
    t0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    order = random.Random(3).sample(range(40), 40)  # stored in no particular order
    await insert_rows(pg_dsn, [
        {"id": f"f{i:02d}", "namespace": "ties", "category": "system.service",
         "summary": "nginx.service failed: address already in use",
         "ts": t0 + timedelta(hours=i)} for i in order])
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool, term_stats=TermStats(pool))
        found = await store.bm25_rows(query_terms("why did nginx fail?"), "ties", None, None, 5)
        assert [m.id for _, _, m in found] == ["f39", "f38", "f37", "f36", "f35"]
    finally:
        await pool.close()


async def test_words_that_follow_each_other_in_the_question_count_as_a_phrase(
        pg_dsn: str) -> None:
    """"task 28.0" is the task, not stage 28.0 of another task; "variable 4" is not 40."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats
    from totalrecall_recall_api.core.text import query_terms

    await create_memories_table(pg_dsn)
    t0 = datetime(2017, 6, 9, 20, 0, tzinfo=UTC)
    rows = [{"id": "task", "namespace": "spark", "ts": t0,
             "summary": "Finished task 28.0 in stage 29.0 (TID 1348)"},
            {"id": "var", "namespace": "spark", "ts": t0,
             "summary": "Reading broadcast variable 4 took 18 ms"}]
    rows += [{"id": f"s-{i}", "namespace": "spark", "ts": t0 + timedelta(seconds=i + 1),
              "summary": f"Finished task {i}.0 in stage 28.0 (TID {1300 + i})"}
             for i in range(30) if i != 28]
    rows += [{"id": f"v-{i}", "namespace": "spark", "ts": t0 + timedelta(seconds=i + 1),
              "summary": f"Reading broadcast variable 4{i} took {i + 2} ms"} for i in range(10)]
    keys = await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool, term_stats=TermStats(pool))
        for question, wanted in (("What stage was the task 28.0 completed in?", "task"),
                                 ("How long did reading broadcast variable 4 take?", "var")):
            found = await store.bm25_rows(query_terms(question), "spark", None, None, 3)
            assert found[0][0] == keys[wanted], [m.summary for _, _, m in found]
    finally:
        await pool.close()


async def test_a_common_word_of_the_question_tells_apart_what_its_rare_words_found(
        pg_dsn: str) -> None:
    """"fail" is in a third of sshd's lines: it is not searched by, but of the two lines of user
    webmaster it is the one that says which failed ("Failed password …" over the shorter, newer
    "Invalid user …")."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats
    from totalrecall_recall_api.core.text import query_terms

    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 12, 10, 6, 0, tzinfo=UTC)
    rows = [{"id": "failed", "namespace": "ssh", "ts": t0,
             "summary": "Failed password for invalid user webmaster from 173.234.31.186 "
                        "port 39257 ssh2"},
            {"id": "invalid", "namespace": "ssh", "ts": t0 + timedelta(seconds=1),
             "summary": "Invalid user webmaster from 173.234.31.186"}]
    rows += [{"id": f"r-{i}", "namespace": "ssh", "ts": t0 + timedelta(seconds=i + 2),
              "summary": f"Failed password for root from 183.62.140.{i % 250} port {30000 + i} ssh2"
              if i % 3 == 0 else f"Connection closed by 103.99.0.{i % 250} [preauth]"}
             for i in range(300)]
    keys = await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        ts = TermStats(pool)
        store = PostgresStore(pool, term_stats=ts)
        searched, common, _ = await store._weighted(
            query_terms("What did the webmaster fail to provide?"), "ssh")
        assert "fail" in dict(common) and "fail" not in dict(searched)
        found = await store.bm25_rows(query_terms("What did the webmaster fail to provide?"),
                                      "ssh", None, None, 5)
        assert [k for k, _, _ in found[:2]] == [keys["failed"], keys["invalid"]], found
        assert len(found) == 2  # the common word found nothing by itself
    finally:
        await pool.close()


async def test_a_word_searched_as_a_prefix_ranks_the_memory_holding_it_as_it_is_first(
        pg_dsn: str) -> None:
    """"postgres" is searched as `postgres:*` (so that "nginx" finds "nginx.service"): the line of
    user postgres scores the word's own IDF, the newer lines of user postgres1 the prefix's."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats
    from totalrecall_recall_api.core.text import query_terms

    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 12, 10, 6, 0, tzinfo=UTC)
    rows = [{"id": "exact", "namespace": "ssh", "ts": t0,
             "summary": "Invalid user postgres from 187.141.143.180"}]
    rows += [{"id": f"longer-{i}", "namespace": "ssh", "ts": t0 + timedelta(seconds=i + 1),
              "summary": f"Invalid user postgres1 from 187.141.143.{i}"} for i in range(3)]
    rows += [{"id": f"r-{i}", "namespace": "ssh", "ts": t0 + timedelta(seconds=i + 10),
              "summary": f"Connection closed by 103.99.0.{i % 250} [preauth]"} for i in range(60)]
    keys = await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool, term_stats=TermStats(pool))
        # (one word: no phrase "user postgres" to tell them apart instead)
        found = await store.bm25_rows(query_terms("postgres?"), "ssh", None, None, 5)
        assert found[0][0] == keys["exact"], [m.summary for _, _, m in found]
        assert {k for k, _, _ in found[1:4]} == {keys[f"longer-{i}"] for i in range(3)}
        assert found[0][1] > found[1][1]
        # a word no memory holds as it is: its prefix's matches rank as before
        found = await store.bm25_rows(query_terms("postg"), "ssh", None, None, 5)
        assert len(found) == 4 and found[0][1] == pytest.approx(found[3][1], rel=0.2)
    finally:
        await pool.close()


async def test_the_newest_repeats_of_a_template_within_the_filters(pg_dsn: str) -> None:
    """Of 40 "PacketResponder 2" lines the store gives the newest 3 (before the asking time
    when there is one), whatever else shares their words."""
    from totalrecall_recall_api.adapters import PostgresStore

    await create_memories_table(pg_dsn)
    t0 = datetime(2008, 11, 9, 20, 0, tzinfo=UTC)
    rows = [{"id": f"p{i}", "namespace": "hdfs", "category": "system.service",
             "ts": t0 + timedelta(minutes=i),
             "summary": f"PacketResponder 2 for block blk_{1000 + i} terminating"}
            for i in range(40)]
    rows += [{"id": f"r{i}", "namespace": "hdfs", "category": "system.service",
              "ts": t0 + timedelta(hours=2, minutes=i),
              "summary": f"Received block blk_{2000 + i} of size 67108864 from /10.0.0.{i}"}
             for i in range(5)]
    rows += [{"id": "other-ns", "namespace": "elsewhere", "category": "system.service",
              "ts": t0 + timedelta(hours=3),
              "summary": "PacketResponder 2 for block blk_9 terminating"}]
    keys = await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool)
        tpl = template_hash("PacketResponder 1 for block blk_5 terminating")
        got = await store.newest_of_templates("hdfs", [tpl], None, None, None, 3)
        assert [m.id for m in got] == ["p39", "p38", "p37"]
        got = await store.newest_of_templates("hdfs", [tpl], t0 + timedelta(minutes=5),
                                              t0 + timedelta(minutes=20, seconds=1),
                                              "system.service", 2)
        assert [m.id for m in got] == ["p20", "p19"]
        assert await store.newest_of_templates("hdfs", [tpl], None, None, "conversation", 3) == []
        both = await store.newest_of_templates(
            "hdfs", [tpl, template_hash("Received block blk_1 of size 2 from /10.0.0.9")],
            None, None, None, 1)
        assert sorted(m.id for m in both) == ["p39", "r4"] and keys["p39"]
    finally:
        await pool.close()


async def test_the_newest_repeats_logged_in_one_second_are_the_same_every_time(
        pg_dsn: str) -> None:
    """Log lines of one template written in the same second (a Spark stage's tasks) tie on
    time: the store gives the ones with the greatest keys, the order recall ranks repeats in,
    not whichever the table happens to hold first (that followed the order of ingest, so the
    same question over the same lines ranked otherwise after a re-import)."""
    from totalrecall_recall_api.adapters import PostgresStore

    await create_memories_table(pg_dsn)
    t0 = datetime(2017, 6, 9, 20, 11, 11, tzinfo=UTC)
    keys = await insert_rows(pg_dsn, [
        {"id": f"s{i}", "namespace": "spark", "category": "system.service", "ts": t0,
         "summary": f"Running task {i}.0 in stage 29.0 (TID {1340 + i})"} for i in range(6)])
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool)
        tpl = template_hash("Running task 1.0 in stage 2.0 (TID 3)")
        got = await store.newest_of_templates("spark", [tpl], None, None, None, 2)
        assert [memory_key("spark", m.id) for m in got] == sorted(keys.values(), reverse=True)[:2]
    finally:
        await pool.close()


async def test_the_counts_of_a_burst_of_inserts_weigh_the_next_search(pg_dsn: str) -> None:
    """The store's counts are exact at every commit: a load is weighed by its own words at the
    next search that reads them, with no refresh to wait for."""
    from totalrecall_recall_api.adapters.termstats import TermStats

    await create_memories_table(pg_dsn)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        ts = TermStats(pool, max_age_s=0)
        assert await ts.counts("conv", ["potteri"]) is None  # an empty store: no counts
        await insert_rows(pg_dsn, [{"id": f"burst-{i}", "namespace": "conv",
                                    "summary": f"Caroline talked about pottery class {i}"}
                                   for i in range(60)])
        counts = await ts.counts("conv", ["potteri", "talk", "kiln"])
        assert counts is not None and (counts.scope, counts.n_docs) == ("namespace", 60)
        assert counts.doc_freq("potteri") == 60 and counts.doc_freq("kiln") == 0
        assert counts.exact == {"potteri": 60, "talk": 60, "kiln": 0}
        assert await ts.describe("conv") == {"scope": "namespace", "memories": 60,
                                             "age_s": pytest.approx(0, abs=1)}
    finally:
        await pool.close()


async def test_a_search_before_a_load_does_not_unweigh_the_searches_after_it(
        pg_dsn: str) -> None:
    """Counts are kept for their max age, but not an empty store's, and a stats poll reads
    sizes the searches then use: the first question after a load is weighed by the load (it
    was weighed by nothing for up to `max_age_s`, so a run asked right after its load ranked
    otherwise than the same questions asked seconds later)."""
    from totalrecall_recall_api.adapters.termstats import TermStats

    await create_memories_table(pg_dsn)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        ts = TermStats(pool, max_age_s=3600)
        assert await ts.counts("conv", ["potteri"]) is None  # before the load
        assert await ts.describe("conv") is None
        await insert_rows(pg_dsn, [{"id": f"early-{i}", "namespace": "conv",
                                    "summary": f"Caroline talked about pottery class {i}"}
                                   for i in range(10)])
        assert await ts.describe("conv") == {"scope": "all", "memories": 10, "age_s": 0.0}
        await insert_rows(pg_dsn, [{"id": f"late-{i}", "namespace": "conv",
                                    "summary": f"Melanie painted a sunrise {i}"}
                                   for i in range(60)])
        assert await ts.describe("conv") == {"scope": "namespace", "memories": 70, "age_s": 0.0}
        counts = await ts.counts("conv", ["potteri", "sunris"])
        assert counts is not None and (counts.scope, counts.n_docs) == ("namespace", 70)
        assert counts.exact == {"potteri": 10, "sunris": 60}
    finally:
        await pool.close()


async def test_a_namespace_loaded_into_a_big_store_is_weighed_by_its_own_counts(
        pg_dsn: str) -> None:
    """A conversation loaded into a big store is searched with its own word counts from its
    first question, not the store's."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats

    await create_memories_table(pg_dsn)
    await insert_rows(pg_dsn, [{"id": f"log-{i}", "namespace": "machine",
                                "summary": f"pottery kiln service restarted ({i})"}
                               for i in range(80)])
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        ts = TermStats(pool)
        before = await ts.counts("chat", ["potteri"])
        assert before is not None and before.scope == "all" and before.doc_freq("potteri") == 80
        await insert_rows(pg_dsn, [{"id": f"chat-{i}", "namespace": "chat",
                                    "summary": f"Melanie: the pottery class was fun ({i})"
                                    if i < 3 else f"Caroline: went running today ({i})"}
                                   for i in range(60)])
        ts = TermStats(pool)  # a recall API started after the load (or counts aged out)
        weighted, _, counts = await PostgresStore(pool, term_stats=ts)._weighted(["pottery"],
                                                                                 "chat")
        assert counts is not None and counts.scope == "namespace" and counts.n_docs == 60
        assert counts.doc_freq("potteri") == 3
        assert dict(weighted)["potteri"] == pytest.approx(counts.idf("potteri"))
        machine = await ts.counts("machine", ["potteri"])
        assert machine is not None and machine.doc_freq("potteri") == 80  # the others' own
    finally:
        await pool.close()


class RecordingPool:
    """A real pool that remembers the last statement it ran (to EXPLAIN it)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.last: tuple[str, tuple[Any, ...]] | None = None

    async def fetch(self, sql: str, *args: Any, timeout: float | None = None,
                    record_class: type[asyncpg.Record] | None = None) -> Any:
        self.last = (sql, args)
        return await self.pool.fetch(sql, *args, timeout=timeout, record_class=record_class)


async def test_words_the_store_has_never_seen_are_looked_up_not_searched_for(pg_dsn: str) -> None:
    """A prompt about something new: its words are rare or absent. Their matches come from the
    GIN index, not from walking every memory of the namespace newest first (the planner cannot
    tell that a word is absent: 126 ms at 100k memories); common words keep the walk."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats

    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 5, 1, 8, 0, tzinfo=UTC)
    keys = await insert_rows(pg_dsn, [
        {"id": "old", "namespace": "walk", "summary": "kubelet evicted the pod", "ts": t0},
        {"id": "new", "namespace": "walk", "summary": "kubelet restarted",
         "ts": t0 + timedelta(days=1)}])
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    conn = await asyncpg.connect(pg_dsn)
    try:
        # enough memories that walking them newest first is a plan the planner weighs
        await conn.execute(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor, source,
                   severity, tags, summary, detail, metadata, tier)
               SELECT 'walk:n' || i, 'n' || i, 'walk', $1::timestamptz + i * interval '1 minute',
                      'conversation', 'general', 'system', 'test', 'info', '{}',
                      'nginx reloaded its config in zone' || (i % 8), '', '{}'::jsonb, 'hot'
               FROM generate_series(1, 20000) AS i""", t0)
        await conn.execute("ANALYZE memories")
        ts = TermStats(pool)
        rec = RecordingPool(pool)
        store = PostgresStore(rec, term_stats=ts, scan_cap=100)  # type: ignore[arg-type]

        async def plan() -> str:
            assert rec.last is not None
            sql, args = rec.last
            return "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, *args))

        found = await store.bm25_rows(["kubelet", "evicted"], "walk", None, None, 10)
        assert [k for k, _, _ in found] == [keys["old"], keys["new"]]  # both words, then one
        assert "Backward" not in await plan()
        assert await store.bm25_rows(["zeppelin", "kubelet"], "walk", None, None, 10)
        assert "Backward" not in await plan()
        common = await store.bm25_rows(["nginx"], "walk", None, None, 10)
        assert len(common) == 10 and "Backward" in await plan()  # the newest 100 matches
        # a common word and a rare one: the common one's newest matches (two index walks, short
        # and long memories), the rare one's looked up (no third walk)
        mixed = await store.bm25_rows(["zone3", "kubelet"], "walk", None, None, 10)
        assert keys["old"] in {k for k, _, _ in mixed} and keys["new"] in {k for k, _, _ in mixed}
        assert (await plan()).count("Backward") == 2
    finally:
        await conn.close()
        await pool.close()


def _literal(value: Any, pg_type: str) -> str:
    """`value` as an SQL literal of `pg_type` (for EXPLAIN EXECUTE of a prepared statement)."""
    if value is None:
        return f"NULL::{pg_type}"
    if isinstance(value, list):
        return "ARRAY[" + ", ".join(_literal(v, pg_type.removesuffix("[]")) for v in value) + \
            f"]::{pg_type}"
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text.replace("'", "''") + f"'::{pg_type}"


class PlannedOnce:
    """The statements a store ran, each prepared on `conn` and run once there: `conn`'s
    sessions plan a statement once (`GENERIC_PLANS`), so each one's plan is made now and kept
    (until something invalidates it), as on the recall API's connections."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.prepared: list[tuple[str, tuple[Any, ...], list[str]]] = []

    async def add(self, sql: str, args: tuple[Any, ...]) -> None:
        types = [t.name for t in (await self.conn.prepare(sql)).get_parameters()]
        name = f"planned{len(self.prepared)}"
        await self.conn.execute(f"PREPARE {name}({', '.join(types)}) AS {sql}")
        self.prepared.append((name, args, types))
        await self.explain(len(self.prepared) - 1)  # planned (and the plan kept) here

    async def explain(self, i: int) -> str:
        """The kept plan of the i-th statement, run with its arguments."""
        name, args, types = self.prepared[i]
        values = ", ".join(_literal(a, t) for a, t in zip(args, types, strict=True))
        rows = await self.conn.fetch(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "
                                     f"EXECUTE {name}({values})")
        return "\n".join(r[0] for r in rows)


def _read_and_dropped(plan: str) -> int:
    """Rows a plan read only to drop them (a window as a filter, or a sequential scan)."""
    return sum(int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan))


async def test_lookups_planned_once_walk_only_their_window(pg_dsn: str) -> None:
    """The newest repeats of a template, rows by key, a hit's neighbours and the
    diagnostic lookup (the newest events of given categories) run on connections that plan each
    statement once (`generic_pool`). Such a plan cannot see the values, so a window must be an
    index condition there, not a filter; and it is kept as the table grows, so it must be an
    index walk even when it was made on a table of a few rows (a sequential scan is cheaper
    there). Planned on a new store, they find the recent errors of a namespace whose older
    errors are many without reading the older ones, and answer as connections that plan for
    the values do."""
    from totalrecall_recall_api.adapters import GENERIC_PLANS, PostgresStore

    await create_memories_table(pg_dsn)
    now = datetime.now(UTC)
    keys = await insert_rows(pg_dsn, [
        {"id": f"r{i}", "namespace": "gp", "category": "error", "severity": "error",
         "summary": "disk sda1 is full", "ts": now - timedelta(minutes=i)} for i in (1, 2)])
    conn = await asyncpg.connect(pg_dsn, server_settings=GENERIC_PLANS)
    custom = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2,
                                       server_settings={"plan_cache_mode": "force_custom_plan"})
    try:
        rec = RecordingPool(custom)
        store = PostgresStore(custom, generic_pool=rec)  # type: ignore[arg-type]
        reference = PostgresStore(custom)
        hour_ago = now - timedelta(hours=1)
        lookups = [
            lambda s: s.newest_of_templates("gp", [template_hash("disk sda1 is full")],
                                            hour_ago, now, None, 5),
            lambda s: s.rows(list(keys.values())),
            lambda s: s.neighbours([keys["r1"]], 2, 6 * 3600.0),
            lambda s: s.recent_rows("gp", hour_ago, None, 5, ["error", "system.storage"]),
        ]
        planned = PlannedOnce(conn)
        for lookup in lookups:
            await lookup(store)
            assert rec.last is not None
            await planned.add(*rec.last)
        await conn.execute(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor, source,
                   severity, tags, summary, detail, metadata, tier, template)
               SELECT 'gp:o' || i, 'o' || i, 'gp', $1::timestamptz + i * interval '1 second',
                      'error', 'general', 'system', 'test', 'error', '{}',
                      'disk sda1 is full', '', '{}'::jsonb, 'warm', $2
               FROM generate_series(1, 3000) AS i""", now - timedelta(days=30),
            template_hash("disk sda1 is full"))
        generic = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1,
                                            server_settings=GENERIC_PLANS)
        try:
            for i, lookup in enumerate(lookups):
                found = await lookup(PostgresStore(custom, generic_pool=generic))
                assert found == await lookup(reference)
                plan = await planned.explain(i)
                assert _read_and_dropped(plan) < 100 and "Seq Scan" not in plan, plan
            assert {r["key"] for r in await lookups[0](store)} == set(keys.values())
            assert set(await lookups[1](store)) == set(keys.values())
        finally:
            await generic.close()
    finally:
        await conn.close()
        await custom.close()


async def test_diagnostic_lookup_planned_once_sees_which_categories_are_absent(pg_dsn: str
                                                                             ) -> None:
    """The diagnostic lookup, planned once on a store that holds one category only: each
    category it names is walked in its own (namespace, category, ts) index range, so a category
    with no memories costs nothing. (With the categories passed as values, the plan could not
    tell them apart and walked the day's every memory once per absent category.)"""
    from totalrecall_recall_api.adapters import GENERIC_PLANS, PostgresStore

    await create_memories_table(pg_dsn)
    now = datetime.now(UTC)
    conn = await asyncpg.connect(pg_dsn, server_settings=GENERIC_PLANS)
    try:
        await conn.execute(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor, source,
                   severity, tags, summary, detail, metadata, tier, template)
               SELECT 'one:e' || i, 'e' || i, 'one', $1::timestamptz - i * interval '10 seconds',
                      'error', 'general', 'system', 'test', 'error', '{}',
                      'disk sda1 is full', '', '{}'::jsonb, 'hot', 't'
               FROM generate_series(1, 3000) AS i""", now)
        await conn.execute("ANALYZE memories")
        rec = RecordingPool(await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1,
                                                      server_settings=GENERIC_PLANS))
        try:
            store = PostgresStore(rec.pool, generic_pool=rec)  # type: ignore[arg-type]
            found = await store.recent_rows("one", now - timedelta(days=1), None, 20,
                                            ["error", "system.storage", "system.pressure",
                                             "system.service"])
            assert [r.id for r in found] == [f"e{i}" for i in range(1, 21)]
            assert rec.last is not None
            planned = PlannedOnce(conn)
            await planned.add(*rec.last)
            plan = await planned.explain(0)
            assert _read_and_dropped(plan) < 100 and "Seq Scan" not in plan, plan
        finally:
            await rec.pool.close()
    finally:
        await conn.close()


def _long_text(n_words: int, seed: int = 0) -> str:
    """A text whose tsvector is several kB (distinct made-up words), like a long chat turn or a
    log excerpt."""
    rnd = random.Random(seed)
    return " ".join("".join(rnd.choices("bcdfghjklmnpqrstvwxz", k=9)) for _ in range(n_words))


async def test_bm25_finds_long_memories_too_big_for_the_covering_index(pg_dsn: str) -> None:
    """A long memory's tsv does not fit in a btree entry: it is stored all the same (a trigger
    marks it) and keyword search finds it next to the short ones."""
    from totalrecall_recall_api.adapters import PostgresStore

    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 4, 1, 8, 0, tzinfo=UTC)
    keys = await insert_rows(pg_dsn, [
        {"id": "long", "namespace": "longmem", "summary": "assistant: the whole itinerary",
         "detail": _long_text(600) + " Cihampelas nasi goreng", "ts": t0},
        {"id": "short", "namespace": "longmem", "summary": "nasi goreng was great",
         "ts": t0 + timedelta(hours=1)}])
    conn = await asyncpg.connect(pg_dsn)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        fits = dict(await conn.fetch("SELECT id, tsv_fits FROM memories WHERE namespace = $1",
                                     "longmem"))
        assert fits == {"long": False, "short": True}
        assert await conn.fetchval("SELECT pg_column_size(tsv || ''::tsvector) > 2704 "
                                   "FROM memories WHERE id = 'long'")
        store = PostgresStore(pool)
        found = await store.bm25_rows(["cihampelas"], "longmem", None, None, 10)
        assert [k for k, _, _ in found] == [keys["long"]]
        both = await store.bm25_rows(["nasi", "goreng"], "longmem", None, None, 10)
        assert {k for k, _, _ in both} == {keys["long"], keys["short"]}
        # an update that shortens it moves it to the covering index
        await conn.execute("UPDATE memories SET detail = 'short now' WHERE id = 'long'")
        assert not await conn.fetchval("SELECT NOT tsv_fits FROM memories WHERE id = 'long'")
    finally:
        await pool.close()
        await conn.close()


async def test_continuation_and_as_of_on_the_real_store(settings: Settings, pg_dsn: str) -> None:
    """"where were we" recalls the latest conversation's thread (not a system event or another
    session in between), and asked as of a moment it shows nothing from a later day."""
    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 5, 1, 12, tzinfo=UTC)
    day = [timedelta(0), timedelta(minutes=1), timedelta(days=1, minutes=2),
           timedelta(days=1, minutes=3)]
    rows = [{"id": f"a{i}", "summary": f"parser refactor step {i}", "ts": t0 + day[i],
             "metadata": {"session": "a"}} for i in range(4)]
    rows += [{"id": "b0", "summary": "chat about lunch", "ts": t0 + timedelta(minutes=1, seconds=30),
              "metadata": {"session": "b"}},
             {"id": "cron", "summary": "cron.service restarted", "category": "system.service",
              "ts": t0 + timedelta(days=1, minutes=9), "metadata": {"service": "cron"}}]
    await insert_rows(pg_dsn, rows)
    async with api(settings) as c:
        got = (await c.post("/memory/recall", json={"query": "where were we",
                                                     "maxResults": 3})).json()
        assert got["query_class"] == "continuation"
        assert [m["id"] for m in got["memories"]] == ["a3", "a2"]  # a1: a day before
        asked = (await c.post("/memory/recall", json={
            "query": "where were we", "maxResults": 3,
            "asOf": (t0 + timedelta(minutes=1, seconds=45)).isoformat()})).json()
        assert [m["id"] for m in asked["memories"]] == ["b0"]  # a2, a3: the next day
        hybrid = (await c.post("/memory/recall", json={
            "query": "parser refactor step", "timeframe": "all", "maxResults": 10,
            "asOf": (t0 + timedelta(minutes=1, seconds=45)).isoformat()})).json()
        assert {m["id"] for m in hybrid["memories"]} == {"a0", "a1"}


async def test_a_new_questions_parse_and_word_counts_come_in_one_statement(pg_dsn: str) -> None:
    """A question not parsed before: its lexemes (words, identifiers, which follow which) and
    their counts in one statement, the same as parsing first and counting after."""
    from totalrecall_recall_api.adapters import PostgresStore
    from totalrecall_recall_api.adapters.termstats import TermStats

    await create_memories_table(pg_dsn)
    t0 = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)
    summaries = ["nginx.service failed: address already in use", "PacketResponder 2 terminating",
                 "disk /home at 91% capacity", "user asked why nginx is slow"]
    await insert_rows(pg_dsn, [{"id": f"pc-{i}", "namespace": "pc", "ts": t0 + timedelta(minutes=i),
                                "summary": summaries[i % 4]} for i in range(80)])
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)

    class Counted:
        def __init__(self) -> None:
            self.statements = 0

        async def fetch(self, *a: Any, **k: Any) -> Any:
            self.statements += 1
            return await pool.fetch(*a, **k)

        async def fetchrow(self, *a: Any, **k: Any) -> Any:
            self.statements += 1
            return await pool.fetchrow(*a, **k)

    terms = ["why", "did", "nginx.service", "fail", "packet", "terminating"]
    try:
        counted = Counted()
        one = PostgresStore(counted, TermStats(counted))  # type: ignore[arg-type]
        merged = await one._weighted(terms, "pc")
        assert counted.statements == 2  # the corpus sizes, then parse and counts together
        two = PostgresStore(pool, TermStats(pool))
        await two._parse(" ".join(terms))  # parsed already: counted on their own, as before
        separate = await two._weighted(terms, "pc")
        assert merged[:2] == separate[:2] and merged[0]
        assert one._lexeme_cache == two._lexeme_cache
        assert one._lexeme_cache[" ".join(terms)][1]  # the pairs of words that follow each other
        assert one.term_stats is not None and two.term_stats is not None
        assert {k: v[1:] for k, v in one.term_stats._words.items()} == \
            {k: v[1:] for k, v in two.term_stats._words.items()}
        assert any(p is not None for _, _, p in one.term_stats._words.values())  # prefixes
        again = counted.statements
        await one._weighted(terms, "pc")
        assert counted.statements == again  # asked again: nothing read
    finally:
        await pool.close()


async def test_speakers_are_the_actors_of_a_namespaces_conversations(pg_dsn: str) -> None:
    """Who speaks in a namespace's conversations (a skip scan of the indexer's migration 17):
    each actor once however many turns they said, not a machine event's actor, not another
    namespace's speaker; through the plan the index serves."""
    from totalrecall_recall_api.adapters import PostgresStore

    await create_memories_table(pg_dsn)
    t0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    rows = [{"id": f"t{i}", "namespace": "talk", "category": "conversation",
             "actor": ["Caroline", "Melanie", "user"][i % 3], "summary": f"turn {i}",
             "ts": t0 + timedelta(seconds=i)} for i in range(300)]
    rows += [{"id": "ev", "namespace": "talk", "category": "system.service", "actor": "nginx",
              "summary": "nginx failed", "ts": t0},
             {"id": "o", "namespace": "talk-other", "category": "conversation", "actor": "Gina",
              "summary": "Gina: hi", "ts": t0}]
    await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool)
        assert await store.speakers("talk") == ["Caroline", "Melanie", "user"]
        assert await store.speakers("talk-other") == ["Gina"]
        assert await store.speakers("nobody") == []
        async with pool.acquire() as conn:
            await conn.execute("ANALYZE memories")
            plan = "\n".join(r[0] for r in await conn.fetch(
                "EXPLAIN SELECT actor FROM memories WHERE namespace = 'talk' AND "
                "category = 'conversation' AND actor > 'Caroline' ORDER BY actor LIMIT 1"))
        assert "memories_ns_cat_actor" in plan, plan
    finally:
        await pool.close()
