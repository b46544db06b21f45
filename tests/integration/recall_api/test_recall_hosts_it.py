"""Two hosts' events through the real pipeline: the recall API (ingest and recall), the embedder
with the real model, the indexer (Postgres, Zvec, the Markdown daily logs), on a real nats-server
and Postgres, all in this process. Recall limited to a host returns only that host's memories,
a question naming a host ranks its memories first, the same line logged on two hosts is two
memories, and a rebuild from the Markdown restores every memory's host."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from totalrecall_embedder.app import create_app as create_embedder
from totalrecall_embedder.settings import Settings as EmbedderSettings
from totalrecall_indexer.app import create_app as create_indexer
from totalrecall_indexer.settings import Settings as IndexerSettings
from totalrecall_recall_api.app import create_app as create_api
from totalrecall_recall_api.settings import Settings as ApiSettings
from totalrecall_schema import AdminReply, AdminRequest, Topology
from waiting import request_served, wait_for

from tests.unit.host_helpers import local_host_as

LINE = "nginx failed to start: port 80 already in use"
#: id → (host named by the event, summary); None: ingested without a host (the API's)
EVENTS: dict[str, tuple[str | None, str]] = {
    "db-nginx": ("DB-01", LINE),
    "web-nginx": ("web-02", LINE),
    "db-disk": ("db-01", "filesystem /var/lib/postgresql is 97% full"),
    "web-cert": ("web-02", "TLS certificate of shop.example.com expires in 3 days"),
    "local-note": (None, "backup of /home finished with errors on the external disk"),
}
HOST_OF = {"db-nginx": "db-01", "web-nginx": "web-02", "db-disk": "db-01",
           "web-cert": "web-02", "local-note": "api-host"}


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with local_host_as(monkeypatch, "api-host", "c" * 32):
        yield


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
                                 embed_timeout_s=10.0, search_timeout_s=10.0, hosts_cache_s=0))
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(embedder)
        await stack.enter_async_context(indexer)
        await stack.enter_async_context(api.router.lifespan_context(api))
        yield await stack.enter_async_context(httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api), base_url="http://recall", timeout=60))


async def stored_hosts(dsn: str) -> dict[str, tuple[str, int]]:
    """id → (the host column, repeat_count) of every stored memory."""
    conn = await asyncpg.connect(dsn)
    try:
        return {r["id"]: (r["host"], r["repeat_count"])
                for r in await conn.fetch("SELECT id, host, repeat_count FROM memories")}
    finally:
        await conn.close()


async def recall(c: httpx.AsyncClient, query: str, **kw: Any) -> list[dict[str, Any]]:
    r = await c.post("/memory/recall", json={"query": query, "maxResults": 10, **kw})
    assert r.status_code == 200, r.text
    return r.json()["memories"]  # type: ignore[no-any-return]


async def test_two_hosts_recall_by_host_and_rebuild_restores_hosts(
        here: None, nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path,
        model_path: Path, nc: Any) -> None:
    async with stack(nats_url, pg_dsn, topology, tr_home, model_path) as c:
        body = [{"id": i, "summary": s, "category": "system.service",
                 "metadata": {"severity": "error"} | ({"host": h} if h else {})}
                for i, (h, s) in EVENTS.items()]
        assert (await c.post("/memory/ingest", json=body)).status_code == 200
        # the same line again on db-01: a repeat of that host's memory, folded into it
        again = await c.post("/memory/ingest", json={
            "id": "db-nginx-again", "summary": LINE, "category": "system.service",
            "metadata": {"severity": "error", "host": "db-01"}})
        assert again.status_code == 200

        async def all_stored() -> dict[str, tuple[str, int]] | None:
            got = await stored_hosts(pg_dsn)
            return got if set(EVENTS) <= set(got) and got["db-nginx"][1] == 2 else None

        stored = await wait_for(all_stored, timeout=120, what="every event indexed")
        # two hosts logging the same line: two memories; the same host again: one, seen twice
        assert {i: h for i, (h, _) in stored.items()} == HOST_OF
        assert stored["web-nginx"][1] == 1 and "db-nginx-again" not in stored

        everyone = await recall(c, "nginx failed to start port 80")
        assert {"db-nginx", "web-nginx"} <= {m["id"] for m in everyone}
        only_db = await recall(c, "nginx failed to start port 80", host="db-01")
        assert only_db and {m["metadata"]["host"] for m in only_db} == {"db-01"}
        assert "db-nginx" in {m["id"] for m in only_db}
        only_web = await recall(c, "what is wrong on the machines?", hosts=["WEB-02"],
                                timeframe="all")
        assert {m["metadata"]["host"] for m in only_web} <= {"web-02"}
        # a question naming a host: that host's memory of the line first
        for host, first in (("db-01", "db-nginx"), ("web-02", "web-nginx")):
            named = await recall(c, f"why did nginx fail to start on {host}?")
            assert named[0]["id"] == first, [(m["id"], m["score"]) for m in named]
        block = (await c.post("/memory/recall", json={"query": "nginx failed to start"})
                 ).json()["system_memory"]
        assert ", on db-01]" in block and ", on web-02]" in block

        # The Markdown is the ground truth: wipe Postgres, rebuild from the daily logs.
        daily = "".join(p.read_text() for p in sorted((tr_home / "memory" / "daily").glob("*.md")))
        assert "host `db-01`" in daily and "host `api-host`" in daily
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute("DELETE FROM memories")
        finally:
            await conn.close()
        msg = await request_served(nc, topology.rpc_index_admin,
                                   AdminRequest(verb="rebuild").model_dump_json().encode(),
                                   timeout=120)
        rep = AdminReply.model_validate_json(msg.data)
        assert rep.ok, rep.error
        assert {i: h for i, (h, _) in (await stored_hosts(pg_dsn)).items()} == HOST_OF
        after = await recall(c, "nginx failed to start port 80", host="db-01")
        assert after and {m["metadata"]["host"] for m in after} == {"db-01"}
