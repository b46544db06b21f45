"""Category filters through the real pipeline: a family (`system.*`) recalls its categories by
keywords (Postgres) and by vector (the embedder with the real model, the indexer's Zvec tiers),
on a real nats-server and Postgres, all in this process; and the store's statements take a
family's categories. Also: MEMORY.md's sections reach only their namespace's session start."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from test_recall_api_it import create_memories_table, insert_rows
from totalrecall_embedder.app import create_app as create_embedder
from totalrecall_embedder.settings import Settings as EmbedderSettings
from totalrecall_indexer.app import create_app as create_indexer
from totalrecall_indexer.settings import Settings as IndexerSettings
from totalrecall_recall_api.adapters.postgres import PostgresStore
from totalrecall_recall_api.app import create_app as create_api
from totalrecall_recall_api.settings import Settings as ApiSettings
from totalrecall_schema import CATEGORIES, Topology
from totalrecall_schema.templates import template_hash
from waiting import wait_for

SYSTEM = tuple(c for c in CATEGORIES if c.startswith("system."))

#: id → (category, summary). "disk" shares no word with the question asked of it (found by its
#: vector alone); the others share "nginx" and "port".
EVENTS: dict[str, tuple[str, str]] = {
    "svc": ("system.service", "nginx failed to start: port 80 already in use"),
    "proc": ("system.process", "nginx worker process killed by the OOM killer"),
    "disk": ("system.storage", "filesystem /var is 97% full"),
    "talk": ("conversation", "we talked about nginx and its port 80 with the user"),
    "err": ("error", "nginx: configuration error in sites-enabled, port 80"),
}

MEMORY_MD = """\
# Memory
- The NAS of the default namespace is at 10.0.0.5.

## Alice
<!-- namespace: alice -->
- Alice's staging database listens on port 6543.
"""


@asynccontextmanager
async def stack(nats_url: str, pg_dsn: str, topology: Topology, home: Path,
                model_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """Embedder, indexer and recall API on this test's subjects, streams, database and home."""
    common: dict[str, Any] = {"nats_url": nats_url, "subject_prefix": topology.prefix,
                              "stream_prefix": topology.stream_prefix, "home": home}
    embedder = create_embedder(EmbedderSettings(**common, model_path=model_path,
                                                retry_delay_s=0.3, n_threads=1,
                                                query_n_threads=1))
    indexer = create_indexer(IndexerSettings(**common, pg_dsn=pg_dsn, fetch_timeout_s=0.5,
                                             retry_delay_s=0.3, background_tasks=False,
                                             embed_timeout_s=20.0))
    api = create_api(ApiSettings(**common, pg_dsn=pg_dsn, memory_dir=home / "memory",
                                 embed_timeout_s=10.0, search_timeout_s=10.0,
                                 memory_md_namespace="default"))
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(embedder)
        await stack.enter_async_context(indexer)
        await stack.enter_async_context(api.router.lifespan_context(api))
        yield await stack.enter_async_context(httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://recall", timeout=60))


async def stored(dsn: str) -> set[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return {r["id"] for r in await conn.fetch("SELECT id FROM memories")}
    finally:
        await conn.close()


async def recall(c: httpx.AsyncClient, query: str, **kw: Any) -> dict[str, dict[str, Any]]:
    """id → memory of what recall returns."""
    r = await c.post("/memory/recall", json={"query": query, "maxResults": 10,
                                             "timeframe": "all", **kw})
    assert r.status_code == 200, r.text
    return {m["id"]: m for m in r.json()["memories"]}


async def test_a_family_is_recalled_by_keywords_and_by_vector(
        nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path,
        model_path: Path) -> None:
    (tr_home / "memory").mkdir(parents=True, exist_ok=True)
    (tr_home / "memory" / "MEMORY.md").write_text(MEMORY_MD)
    async with stack(nats_url, pg_dsn, topology, tr_home, model_path) as c:
        body = [{"id": i, "summary": s, "category": cat, "metadata": {"severity": "error"}}
                for i, (cat, s) in EVENTS.items()]
        assert (await c.post("/memory/ingest", json=body)).status_code == 200
        await wait_for(lambda: _all_stored(pg_dsn), timeout=120, what="every event indexed")

        # Keywords (and vectors): the family's memories, none of the other categories'.
        everyone = await recall(c, "nginx port 80")
        assert {"svc", "talk", "err"} <= set(everyone)
        family = await recall(c, "nginx port 80", category="system.*")
        assert "svc" in family and {m["category"] for m in family.values()} <= set(SYSTEM)
        assert not {"talk", "err"} & set(family)
        assert family["svc"]["metadata"]["_scores"]["bm25"] > 0  # found by its words
        assert family["svc"]["metadata"]["_scores"]["vector"] > 0  # and by its vector
        # The vector alone: no word of the question is in the memory.
        by_vector = await recall(c, "the disk is running out of free space", category="system.*")
        assert "disk" in by_vector, by_vector.keys()
        scores = by_vector["disk"]["metadata"]["_scores"]
        assert scores["vector"] > 0 and scores["bm25"] == 0
        assert {m["category"] for m in by_vector.values()} <= set(SYSTEM)
        # One category, as before; a family of one.
        assert set(await recall(c, "nginx port 80", category="error")) == {"err"}
        assert not set(await recall(c, "nginx port 80", category="agent.*"))

        # A filter that names no category: refused with the reason, not an empty recall.
        bad = await c.post("/memory/recall", json={"query": "nginx", "category": "system"})
        assert bad.status_code == 422 and "'system.*'" in bad.json()["detail"]

        tl = await c.post("/memory/timeline", json={"hours": 24, "category": "system.*"})
        assert tl.status_code == 200, tl.text
        assert {m["id"] for m in tl.json()["memories"]} == {"svc", "proc", "disk"}

        # MEMORY.md: the session start of another namespace shows none of the default's
        # sections; the default's shows its own and not alice's.
        other = (await c.post("/memory/warm", json={"namespace": "other"})).json()
        assert other["bundle"]["memory_md"] == "" and "10.0.0.5" not in other["session_context"]
        mine = (await c.post("/memory/warm", json={"namespace": "default"})).json()
        assert "10.0.0.5" in mine["session_context"] and "6543" not in mine["session_context"]
        alice = (await c.post("/memory/warm", json={"namespace": "alice"})).json()
        assert "6543" in alice["session_context"] and "10.0.0.5" not in alice["session_context"]


async def _all_stored(dsn: str) -> bool:
    return set(EVENTS) <= await stored(dsn)


async def test_the_stores_statements_take_a_familys_categories(pg_dsn: str) -> None:
    await create_memories_table(pg_dsn)
    t0 = datetime.now(UTC) - timedelta(hours=1)
    rows = [{"id": i, "category": cat, "summary": s, "ts": t0 + timedelta(minutes=n),
             "metadata": {"session": "s1"}}  # one thread (the conversation's)
            for n, (i, (cat, s)) in enumerate(EVENTS.items())]
    keys = await insert_rows(pg_dsn, rows)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        store = PostgresStore(pool)
        hits = await store.bm25_rows(["nginx"], "default", None, SYSTEM, 10)
        assert {r["id"] for _, _, r in hits} == {"svc", "proc"}
        assert {r["id"] for _, _, r in await store.bm25_rows(["nginx"], "default", None,
                                                             "error", 10)} == {"err"}
        assert len(await store.bm25_rows(["nginx"], "default", None, None, 10)) == 4
        near = await store.neighbours([keys["svc"]], 5, 7200.0, category=SYSTEM)
        assert {k for k, _ in near[keys["svc"]]} == {keys["proc"], keys["disk"]}
        near = await store.neighbours([keys["svc"]], 5, 7200.0, category="system.storage")
        assert {k for k, _ in near[keys["svc"]]} == {keys["disk"]}
        tpl = template_hash(EVENTS["svc"][1])
        assert [r["id"] for r in await store.newest_of_templates(
            "default", [tpl], None, None, SYSTEM, 3)] == ["svc"]
        assert await store.newest_of_templates("default", [tpl], None, None, ("error",), 3) == []
    finally:
        await pool.close()
