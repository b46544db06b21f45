"""The indexer killed with SIGKILL during its *first* start (before, while and after it
creates its Zvec collections), with events waiting in JetStream, comes back at the next start and
indexes everything: every event once in Postgres, in Zvec and in the Markdown.

Before the fix a collection left half-created (a `LOCK`, `idmap.0`, a segment folder, no version
file) made every later start fail with `KeyError: 'Failed to find the version file'`."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from indexer_it_helpers import MODEL, Harness, unit_vectors, wait_for
from indexer_proc import IndexerProcess
from nats.js.errors import NotFoundError
from totalrecall_indexer.adapters.zvec_tiers import ZvecTiers
from totalrecall_indexer.core.search import TIERS
from totalrecall_schema import EmbeddedEvent, EmbedReply, EmbedRequest, MemoryEvent, Topology
from totalrecall_schema.daily_log import iter_blocks

N = 120


def _waiting_events() -> list[EmbeddedEvent]:
    """A third each for the hot, warm and cold tier, so that every collection gets writes."""
    now = datetime.now(UTC)
    ages = (timedelta(minutes=5), timedelta(days=3), timedelta(days=150))
    vecs = unit_vectors(N, seed=25)
    return [EmbeddedEvent(event=MemoryEvent(
                id=f"first-{i}", timestamp=now - ages[i % 3] - timedelta(seconds=i),
                category="system.service", summary=f"unit {i} failed to start"),
            vector=[float(v) for v in vecs[i]], model=MODEL) for i in range(N)]


@pytest.mark.parametrize("kill_after_s", [0.15, 0.3, 0.45, 0.6, 0.8, 1.2, 2.0])
async def test_killed_during_its_first_start_it_comes_back_and_indexes_everything(
        kill_after_s: float, nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path,
        harness: Harness, tmp_path: Path) -> None:
    events = _waiting_events()
    by_key = {e.event.key: e for e in events}
    await asyncio.gather(*[await harness.js.publish_async(
        topology.embedded_subject(e.event.category), e.model_dump_json().encode(),
        headers={"Nats-Msg-Id": e.event.key}) for e in events])
    vectors = {e.event.embedding_text(): e.vector for e in events}

    async def embedder(msg: Any) -> None:  # for a quarantined tier refilled from Postgres
        req = EmbedRequest.model_validate_json(msg.data)
        await msg.respond(EmbedReply(vectors=[vectors[t] for t in req.texts], model=MODEL,
                                     dim=384).model_dump_json().encode())

    sub = await harness.nc.subscribe(topology.rpc_embed_batch, cb=embedder)
    proc = IndexerProcess(nats_url=nats_url, pg_dsn=pg_dsn, home=tr_home, topology=topology,
                          log_path=tmp_path / "indexer.log", ack_wait_s=3,
                          fetch_timeout_s=0.3, retry_delay_s=0.5, metrics_interval_s=0)
    conn = await asyncpg.connect(pg_dsn)
    try:
        proc.start()
        await asyncio.sleep(kill_after_s)  # the moment of the kill is the test's parameter
        proc.kill9()
        proc.start()

        async def indexed() -> bool:
            assert proc.alive, proc.log_tail()
            try:
                if await conn.fetchval("SELECT count(*) FROM memories") != N:
                    return False
                info = await harness.js.consumer_info(topology.embedded_stream,
                                                      topology.indexer_durable)
            except (asyncpg.UndefinedTableError, NotFoundError):  # not created yet
                return False
            return info.num_pending == 0 and info.num_ack_pending == 0

        await wait_for(indexed, timeout=120, interval=0.2, what="every event indexed and acked")

        async def healthy() -> bool:
            return (await proc.wait_healthy())["status"] == "ok"  # no tier held or refilling

        await wait_for(healthy, timeout=120, interval=0.5, what="the indexer healthy")
        keys = [r["key"] for r in await conn.fetch("SELECT key FROM memories")]
        assert sorted(keys) == sorted(by_key)  # the primary key: each once
        quarantined = proc.log_count("cannot be opened")
        assert proc.stop() in (0, -15)
    finally:
        await conn.close()
        await sub.unsubscribe()
        if proc.alive:
            proc.kill9()
    print(f"\nkilled after {kill_after_s}s; collections quarantined at the restart: {quarantined}")

    tiers = ZvecTiers(tr_home / "zvec")
    tiers.open()
    try:
        found: dict[str, int] = {}
        for tier in TIERS:
            for key in tiers.fetch(tier, list(by_key)):
                found[key] = found.get(key, 0) + 1
    finally:
        tiers.close()
    assert found == dict.fromkeys(by_key, 1)  # every event in exactly one tier

    in_markdown: dict[str, int] = {}
    for path in (tr_home / "memory" / "daily").glob("*.md"):
        for block in iter_blocks(path.read_text(encoding="utf-8")):
            if block.kind == "event" and block.key:
                in_markdown[block.key] = in_markdown.get(block.key, 0) + 1
    assert in_markdown == dict.fromkeys(by_key, 1)
