"""An index in two partitions, each owned by its own indexer process (its own home: its own Zvec
tiers and Markdown logs, as on two machines) over one Postgres: each memory is written by its
partition's owner alone; a vector search asked once is answered by both and merged; with one
owner killed the answer says which partition is missing, and nothing else fails; restarted, it
carries on from its durable consumer."""

from __future__ import annotations

import collections
import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import asyncpg
import numpy as np
import pytest
from indexer_it_helpers import MODEL, unit_vectors, wait_for
from indexer_proc import IndexerProcess
from totalrecall_recall_api.adapters.nats_clients import NatsVectorIndex
from totalrecall_schema import (
    AdminRequest,
    EmbeddedEvent,
    EventMetadata,
    MemoryEvent,
    Topology,
    VectorFilter,
    VectorSearchRequest,
    ensure_streams,
)
from totalrecall_schema.daily_log import parse_daily
from totalrecall_schema.partitions import partition_of

N = 240
HOSTS = ("db-01", "web-01", "web-02", "nas")

pytestmark = pytest.mark.timeout(300)


def _events(vecs: np.ndarray, start: int = 0) -> list[EmbeddedEvent]:
    out = []
    for i in range(len(vecs)):
        n = start + i
        ev = MemoryEvent(id=f"p-{n}", namespace="default" if n % 5 else "ops",
                         category="system.service", summary=f"unit {n} failed on its host",
                         metadata=EventMetadata(severity="error", host=HOSTS[n % len(HOSTS)]))
        out.append(EmbeddedEvent(event=ev, vector=[float(v) for v in vecs[i]], model=MODEL))
    return out


async def _publish(js: Any, topo: Topology, events: list[EmbeddedEvent]) -> None:
    for ev in events:
        await js.publish(topo.embedded_subject_of(ev.event), ev.model_dump_json().encode(),
                         headers={"Nats-Msg-Id": ev.event.key})


def _markdown_keys(home: Path) -> list[str]:
    keys = []
    for path in sorted((home / "memory" / "daily").glob("????-??-??.md")):
        keys += [r.key for r in parse_daily(path.read_text())]
    return keys


async def test_two_partitions_two_writers_one_merged_answer(
        nats_url: str, pg_dsn: str, topology: Topology, tmp_path: Path) -> None:
    import nats

    topo = dataclasses.replace(topology, partitions=2)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, topo)
    procs = [IndexerProcess(nats_url=nats_url, pg_dsn=pg_dsn, home=tmp_path / f"idx{p}",
                            topology=topo, log_path=tmp_path / f"indexer{p}.log",
                            partition_count=2, partitions=str(p), fetch_timeout_s=0.3,
                            memory_md_poll_s=0)
             for p in range(2)]
    vecs = unit_vectors(N, seed=11)
    events = _events(vecs)
    owner = {ev.event.key: partition_of(ev.event.namespace, ev.event.metadata.hostname, 2)
             for ev in events}
    assert set(owner.values()) == {0, 1}  # the hosts and namespaces spread over both
    conn = await asyncpg.connect(pg_dsn)
    index = NatsVectorIndex(nc, topo, timeout=3.0)
    try:
        for p in procs:
            (p.home).mkdir()
            await p.start().wait_healthy()
        await _publish(js, topo, events[: N // 2])

        async def stored(n: int) -> bool:
            return int(await conn.fetchval("SELECT count(*) FROM memories")) >= n
        await wait_for(lambda: stored(N // 2), timeout=120, what="the first half in Postgres")

        # One search, two answers, merged: the nearest memory of either partition is found.
        for i in (0, 1, 2, 3):
            reply = await index.search(VectorSearchRequest(
                vector=[float(v) for v in vecs[i]], model=MODEL, topk=5, tiers=["hot"],
                filter=VectorFilter(namespace=events[i].event.namespace)))
            assert reply.partitions == [0, 1] and reply.missing_partitions == []
            assert reply.hits[0].key == events[i].event.key

        # One owner dies: the other partition still answers, and the reply names the missing.
        procs[1].kill9()
        await _publish(js, topo, events[N // 2:])
        in_0 = next(i for i in range(N // 2, N) if owner[events[i].event.key] == 0)
        in_1 = next(i for i in range(N // 2) if owner[events[i].event.key] == 1)
        await wait_for(lambda: stored(N // 2 + sum(1 for e in events[N // 2:]
                                                   if owner[e.event.key] == 0)),
                       timeout=120, what="partition 0's second half in Postgres")
        reply = await index.search(VectorSearchRequest(
            vector=[float(v) for v in vecs[in_0]], model=MODEL, topk=5, tiers=["hot"],
            filter=VectorFilter(namespace=events[in_0].event.namespace)))
        assert reply.partitions == [0] and reply.missing_partitions == [1]
        assert reply.hits[0].key == events[in_0].event.key
        reply = await index.search(VectorSearchRequest(
            vector=[float(v) for v in vecs[in_1]], model=MODEL, topk=5, tiers=["hot"],
            filter=VectorFilter(namespace=events[in_1].event.namespace)))
        assert events[in_1].event.key not in {h.key for h in reply.hits}

        # Back: it takes up its durable consumer where it stopped.
        await procs[1].start().wait_healthy()
        await wait_for(lambda: stored(N), timeout=120, what="every memory in Postgres")

        async def ready() -> bool:
            return all([(await p.health() or {}).get("docs", {}).get("hot", 0) > 0
                        for p in procs])
        await wait_for(ready, timeout=60, what="both owners with documents")
        healths = [await p.health() for p in procs]

        # An admin verb reaches every owner and their answers are merged: a forget of one
        # memory of each partition finds both, the stats count every partition's rows.
        gone = [next(e.event for e in events if owner[e.event.key] == p
                     and e.event.namespace == "default") for p in (0, 1)]
        forget = await index.admin(AdminRequest(verb="forget", namespace="default",
                                                keys=[e.key for e in gone]), timeout=30)
        assert forget.ok and forget.partitions == [0, 1], forget
        assert sorted(forget.result["found"]) == sorted(e.key for e in gone)  # type: ignore[arg-type]
        assert forget.result["forgotten"] == 2
        stats = await index.admin(AdminRequest(verb="stats"), timeout=30)
        assert stats.ok and stats.missing_partitions == [], stats
        assert stats.result["pg_count"] == N - 2
        assert len(stats.result["owners"]) == 2  # type: ignore[arg-type]

        # `totalrecall rebuild` on a running fleet: every owner rebuilds its part from its own
        # Markdown, and the command waits for all of them (not the first answer).
        from totalrecall.commands.rebuild.online import rebuild_via_nats
        from totalrecall.commands.rebuild.progress import Progress
        rebuilt = await rebuild_via_nats(SimpleNamespace(nats_url=nats_url, topology=topo),
                                         Progress("none"), timeout=120)
        assert rebuilt["records"] == N - 2, rebuilt
        assert sorted(o["partitions"][0] for o in rebuilt["owners"]) == [0, 1], rebuilt
        assert int(await conn.fetchval("SELECT count(*) FROM memories")) == N - 2
        rows = await conn.fetch("SELECT key, part FROM memories")
    finally:
        for p in procs:
            p.stop()
        await conn.close()
        await nc.close()

    # After the rebuild, each row still in its owner's partition, the forgotten ones not back.
    assert {r["key"]: r["part"] for r in rows} == {
        k: p for k, p in owner.items() if k not in {e.key for e in gone}}
    # Each owner holds exactly its partition's memories: in Zvec and in its Markdown logs.
    per_part = collections.Counter(owner.values())
    for p, health in enumerate(healths):
        assert health is not None and health["partitions"] == [p]
        assert sum(health["docs"].values()) == per_part[p]
        md = _markdown_keys(procs[p].home)
        assert len(md) == len(set(md)) == per_part[p] - 1  # its forgotten one is gone
        assert {owner[k] for k in md} == {p} and gone[p].key not in md


async def _ready(proc: IndexerProcess) -> tuple[int, dict[str, Any]]:
    import httpx

    async with httpx.AsyncClient() as http:
        r = await http.get(f"http://127.0.0.1:{proc.port}/ready", timeout=5)
        return r.status_code, r.json()


async def test_a_partition_has_one_writer_and_a_standby_takes_over(
        nats_url: str, pg_dsn: str, topology: Topology, tmp_path: Path) -> None:
    """Two indexers configured with the same partition: the second waits for its lease (not
    ready, reading nothing) while the first lives, and takes over once the first was killed."""
    import nats

    topo = dataclasses.replace(topology, partitions=2)
    nc = await nats.connect(nats_url)
    await ensure_streams(nc.jetstream(), topo)
    procs = [IndexerProcess(nats_url=nats_url, pg_dsn=pg_dsn, home=tmp_path / f"idx{i}",
                            topology=topo, log_path=tmp_path / f"indexer{i}.log",
                            partition_count=2, partitions="0", fetch_timeout_s=0.3,
                            memory_md_poll_s=0, partition_lease_s=3)
             for i in range(2)]
    vecs = unit_vectors(120, seed=5)
    events = [e for e in _events(vecs)
              if partition_of(e.event.namespace, e.event.metadata.hostname, 2) == 0]
    first, second = events[: len(events) // 2], events[len(events) // 2:]
    conn = await asyncpg.connect(pg_dsn)

    async def stored(n: int) -> bool:
        return int(await conn.fetchval("SELECT count(*) FROM memories")) >= n
    try:
        for p in procs:
            p.home.mkdir()
        await procs[0].start().wait_healthy()
        await wait_for(lambda: _is_ready(procs[0]), timeout=60, what="the first owner ready")
        await procs[1].start().wait_healthy()
        status, body = await _ready(procs[1])
        assert status == 503 and "partitions" in body["waiting_for"], body

        await _publish(nc.jetstream(), topo, first)
        await wait_for(lambda: stored(len(first)), timeout=60, what="the first half stored")
        assert len(_markdown_keys(procs[0].home)) == len(first)
        assert _markdown_keys(procs[1].home) == []  # the standby wrote nothing

        procs[0].kill9()
        await wait_for(lambda: _is_ready(procs[1]), timeout=60, what="the standby taking over")
        await _publish(nc.jetstream(), topo, second)
        await wait_for(lambda: stored(len(events)), timeout=60, what="the second half stored")
        assert sorted(_markdown_keys(procs[1].home)) == sorted(e.event.key for e in second)
        assert procs[1].log_count("is their only writer") == 1
    finally:
        for p in procs:
            p.stop()
        await conn.close()
        await nc.close()


async def _is_ready(proc: IndexerProcess) -> bool:
    try:
        return (await _ready(proc))[0] == 200
    except Exception:
        return False
