"""GET /memory/export and POST /memory/forget of recall-api against a real Postgres and NATS
(no indexer process: forget must then say 503)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
from test_recall_api_it import api, create_memories_table, insert_rows
from totalrecall_recall_api.settings import Settings
from totalrecall_schema import ExportedMemory, Topology, memory_key


@pytest.fixture
def settings(nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path) -> Settings:
    return Settings(nats_url=nats_url, pg_dsn=pg_dsn, subject_prefix=topology.prefix,
                    stream_prefix=topology.stream_prefix, memory_dir=tr_home / "memory",
                    embed_timeout_s=2.0, search_timeout_s=2.0,
                    admin_timeout_s=2.0)


async def test_export_streams_every_memory_of_a_namespace_in_key_order(
        settings: Settings, pg_dsn: str) -> None:
    await create_memories_table(pg_dsn)
    t0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    rows = [{"id": f"m-{i}", "summary": f"memory {i} — ünïcödé ✓ {'x' * (i % 7)}",
             "detail": "line one\nline two\t\"quoted\"" if i % 3 == 0 else "",
             "category": "system.service" if i % 2 else "conversation",
             "severity": "error" if i % 5 == 0 else "info", "tags": [f"t{i % 4}", "export"],
             "metadata": {"service": "nginx", "conversation_id": f"c{i % 9}", "nested": {"n": i}},
             "ts": t0 + timedelta(seconds=i)} for i in range(1234)]  # > one cursor prefetch
    await insert_rows(pg_dsn, rows)
    await insert_rows(pg_dsn, [{"id": "other-ns", "summary": "not mine", "namespace": "ops"}])
    conn = await asyncpg.connect(pg_dsn)
    await conn.execute("UPDATE memories SET repeat_count = 3, last_seen = ts + interval '1 hour' "
                       "WHERE id = 'm-7'")
    await conn.close()
    async with api(settings) as c:
        r = await c.get("/memory/export")
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
        lines = r.text.splitlines()
        assert len(lines) == 1234
        got = [ExportedMemory.model_validate_json(line) for line in lines]
        keys = [memory_key(m.namespace, m.id) for m in got]
        assert keys == sorted(keys)
        by_id = {m.id: m for m in got}
        m7 = by_id["m-7"]
        assert m7.repeat_count == 3 and m7.last_seen == t0 + timedelta(seconds=7, hours=1)
        m0 = by_id["m-0"]
        assert m0.summary == "memory 0 — ünïcödé ✓ " and m0.detail.startswith("line one\n")
        assert m0.timestamp == t0 and m0.category == "conversation"
        assert m0.metadata.severity == "error" and m0.metadata.tags == ["t0", "export"]
        assert m0.metadata.service == "nginx"
        assert m0.metadata.model_extra == {"conversation_id": "c0", "nested": {"n": 0}}
        assert "repeat_count" not in m0.to_event() and m0.to_event()["id"] == "m-0"
        assert json.loads(lines[0])["timestamp"].endswith("+00:00")

        ops = (await c.get("/memory/export", params={"namespace": "ops"})).text.splitlines()
        assert [json.loads(x)["id"] for x in ops] == ["other-ns"]
        assert (await c.get("/memory/export", params={"namespace": "nobody"})).text == ""
        bad = await c.get("/memory/export", params={"namespace": "no/slashes"})
        assert bad.status_code == 422


async def test_forget_without_an_indexer_is_a_503(settings: Settings, pg_dsn: str) -> None:
    await create_memories_table(pg_dsn)
    await insert_rows(pg_dsn, [{"id": "keep", "summary": "still here"}])
    async with api(settings) as c:
        r = await c.post("/memory/forget", json={"ids": ["keep"]})
        assert r.status_code == 503 and r.json()["detail"].startswith("indexer unavailable")
        assert len((await c.get("/memory/export")).text.splitlines()) == 1
