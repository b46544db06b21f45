"""Helpers and fixtures for the indexer integration tests (real nats-server, Postgres, Zvec)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import pytest
from totalrecall_indexer.app import create_app
from totalrecall_indexer.settings import Settings
from totalrecall_schema import EmbeddedEvent, EventMetadata, MemoryEvent, Topology
from waiting import request_served
from waiting import wait_for as wait_for  # the indexer tests' import of it

DIM = 384
MODEL = "test-model:0123456789ab"




def unit_vectors(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_event(i: int, vec: np.ndarray | None, *, namespace: str = "default",
               category: str = "error", severity: str = "error",
               age: timedelta = timedelta(minutes=5), summary: str | None = None,
               model: str | None = MODEL) -> EmbeddedEvent:
    ev = MemoryEvent(
        id=f"ev-{i}", namespace=namespace, category=category, subcategory="general",
        timestamp=datetime.now(UTC) - age - timedelta(seconds=i),
        summary=summary or f"memory number {i} about things",
        detail=f"detail of {i}\n```\ncode\n```\n--> <b>html</b>",
        metadata=EventMetadata(severity=severity, tags=["t1", f"n{i}"], service="svc"))
    if vec is None:
        return EmbeddedEvent(event=ev)
    return EmbeddedEvent(event=ev, vector=[float(v) for v in vec], model=model)


@pytest.fixture
def settings(nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path) -> Settings:
    return Settings(nats_url=nats_url, pg_dsn=pg_dsn, home=tr_home,
                    subject_prefix=topology.prefix, stream_prefix=topology.stream_prefix,
                    fetch_timeout_s=0.5, retry_delay_s=0.3, background_tasks=False,
                    embed_timeout_s=5.0)


class Harness:
    def __init__(self, nc: Any, topology: Topology) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.topology = topology

    async def publish(self, events: list[EmbeddedEvent], msg_id_suffix: str = "") -> None:
        for ev in events:
            await self.js.publish(self.topology.embedded_subject(ev.event.category),
                                  ev.model_dump_json().encode(),
                                  headers={"Nats-Msg-Id": ev.event.key + msg_id_suffix})

    async def request(self, subject: str, payload: Any, timeout: float = 30.0) -> bytes:
        msg = await request_served(self.nc, subject, payload.model_dump_json().encode(),
                                   timeout=timeout)
        return msg.data


@pytest.fixture
def harness(nc: Any, topology: Topology) -> Harness:
    return Harness(nc, topology)


@asynccontextmanager
async def running(settings: Settings, **kw: Any) -> AsyncIterator[Any]:
    app = create_app(settings, **kw)
    async with app:
        yield app


#: Memories written straight into the mirror (key, namespace, summary): an upsert as the
#: indexer's, whose conflicts change the namespace and the text.
_INSERT = """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor, source,
                                   severity, summary, detail)
             SELECT k, k, ns, now(), 'system.service', 'general', 'system', 'journald', 'error',
                    s, ''
             FROM unnest($1::text[], $2::text[], $3::text[]) AS u(k, ns, s)
             ON CONFLICT (key) DO UPDATE SET namespace = EXCLUDED.namespace,
                                             summary = EXCLUDED.summary,
                                             repeat_count = memories.repeat_count + 1"""


async def write_memories(conn: asyncpg.Connection, rows: list[tuple[str, str, str]]) -> None:
    await conn.execute(_INSERT, [k for k, _, _ in rows], [n for _, n, _ in rows],
                       [s for _, _, s in rows])


async def assert_counts_exact(conn: asyncpg.Connection) -> None:
    kept = {(r["namespace"], r["lexeme"]): r["ndoc"] for r in await conn.fetch(
        "SELECT namespace, lexeme, ndoc FROM term_stats")}
    counted = {(r["namespace"], r["lexeme"]): r["n"] for r in await conn.fetch(
        "SELECT namespace, u.lexeme, count(*) AS n FROM memories, unnest(tsv) AS u "
        "GROUP BY 1, 2")}
    assert kept == counted
    sizes = dict(await conn.fetch("SELECT namespace, ndoc FROM namespace_stats"))
    assert sizes == dict(await conn.fetch(
        "SELECT namespace, count(*) FROM memories GROUP BY namespace"))
