"""Crash safety with real kills: the indexer runs as `python -m totalrecall_indexer`, a burst of
embedded events is published, and the process is killed with SIGKILL at random moments while it
writes (Markdown appends, Postgres upserts, Zvec upserts, HNSW builds), then restarted. At the end
every memory is in Postgres, in Zvec (one tier, with its own vector) and in the Markdown daily logs
exactly once, and nothing was dead-lettered. The kill inside an HNSW build that breaks zvec is
forced deterministically in test_indexer_build_crash.py."""

from __future__ import annotations

import asyncio
import random
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from indexer_it_helpers import MODEL, Harness, unit_vectors, wait_for
from indexer_proc import IndexerProcess
from totalrecall_indexer.adapters.zvec_tiers import ZvecTiers
from totalrecall_indexer.core.search import TIERS
from totalrecall_indexer.core.torn_tail import find_torn_tail
from totalrecall_schema import (
    EmbeddedEvent,
    EmbedReply,
    EmbedRequest,
    EventMetadata,
    MemoryEvent,
    Topology,
)
from totalrecall_schema.daily_log import file_header, iter_blocks, parse_daily

N = 3000
KILLS = 10
WORDS = ("nginx", "failed", "restart", "kernel:", "oom-killer", "`sudo`", "systemd[1]:", "✓",
         "Ünïcödé", "日本語", "exit-code", "\n", "\n\n", "```", "## ", "<!--", "-->", "pid=42")


def _tier_age(i: int) -> tuple[str, timedelta]:
    """A third each for hot, warm and cold, on a handful of days (so a batch spans files)."""
    if i % 3 == 0:
        return "hot", timedelta(minutes=5, seconds=i)
    if i % 3 == 1:
        return "warm", timedelta(days=2 + i % 3, seconds=i)
    return "cold", timedelta(days=120 + i % 2, seconds=i)


def _events(n: int) -> tuple[list[EmbeddedEvent], dict[str, str]]:
    rng = random.Random(7)
    vecs = unit_vectors(n, seed=11)
    now = datetime.now(UTC)
    events, tiers = [], {}
    for i in range(n):
        tier, age = _tier_age(i)
        # 0.2–6 kB details: a batch is a few hundred kB of Markdown, written in one go
        detail = " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 900)))
        ev = MemoryEvent(
            id=f"crash-{i}", timestamp=now - age, category="system.service",
            subcategory="fail", summary=f"unit {i} failed ({rng.choice(WORDS).strip()})",
            detail=detail, metadata=EventMetadata(severity="error", service=f"svc{i % 13}"))
        events.append(EmbeddedEvent(event=ev, vector=[float(v) for v in vecs[i]], model=MODEL))
        tiers[ev.key] = tier
    return events, tiers


async def _publish(h: Harness, events: list[EmbeddedEvent]) -> None:
    for start in range(0, len(events), 500):
        acks = [await h.js.publish_async(
                    h.topology.embedded_subject(ev.event.category), ev.model_dump_json().encode(),
                    headers={"Nats-Msg-Id": ev.event.key})
                for ev in events[start: start + 500]]
        await asyncio.gather(*acks)


class Rows:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: asyncpg.Connection | None = None

    async def count(self) -> int:
        if self.conn is None:
            self.conn = await asyncpg.connect(self.dsn)
        try:
            return int(await self.conn.fetchval("SELECT count(*) FROM memories"))
        except asyncpg.UndefinedTableError:
            return 0

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


async def test_kill_9_while_writing_loses_and_duplicates_nothing(
        nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path, harness: Harness,
        tmp_path: Path) -> None:
    events, want_tier = _events(N)
    by_key = {e.event.key: e for e in events}
    await _publish(harness, events)
    # The embedder, for a tier that has to be re-indexed (zvec can leave a collection
    # unopenable when killed inside optimize(); see test_indexer_tier_recovery).
    table = {e.event.embedding_text(): e.vector for e in events}

    async def embedder(msg: Any) -> None:
        req = EmbedRequest.model_validate_json(msg.data)
        await msg.respond(EmbedReply(vectors=[table[t] for t in req.texts], model=MODEL,
                                     dim=384).model_dump_json().encode())

    embed_sub = await harness.nc.subscribe(topology.rpc_embed_batch, cb=embedder)
    proc = IndexerProcess(
        nats_url=nats_url, pg_dsn=pg_dsn, home=tr_home, topology=topology,
        log_path=tmp_path / "indexer.log", ack_wait_s=3, fetch_timeout_s=0.3, retry_delay_s=0.5,
        optimize_interval_s=0.5, optimize_min_new_docs=250, metrics_interval_s=0,
        linear_max_docs=0)  # builds however small the tiers: kills land inside them too
    rows = Rows(pg_dsn)
    rng = random.Random(20260)
    kills: list[tuple[int, float]] = []
    t_start = time.monotonic()
    try:
        while len(kills) < KILLS:
            proc.start(batch_size=rng.choice([16, 32, 64, 128, 256]))
            before = await rows.count()

            async def progressed(before: int = before) -> bool:
                assert proc.alive, proc.log_tail()
                return await rows.count() > before

            await wait_for(progressed, timeout=120, interval=0.002,
                           what="the restarted indexer writes")
            if await rows.count() >= N:
                break
            # A random moment while it writes: right as a batch lands in Postgres (its Markdown
            # append runs alongside), or a little later (Zvec upserts, HNSW builds, next batch).
            if rng.random() < 0.5:
                await asyncio.sleep(rng.uniform(0.0, 0.4))
            proc.kill9()
            kills.append((await rows.count(), round(time.monotonic() - t_start, 1)))
        proc.start(batch_size=256)

        async def done() -> bool:
            info = await harness.js.consumer_info(topology.embedded_stream,
                                                  topology.indexer_durable)
            return (await rows.count() == N and info.num_pending == 0
                    and info.num_ack_pending == 0)

        await wait_for(done, timeout=300, interval=0.2, what="every event indexed and acked")

        async def healthy() -> Any:
            health = await proc.wait_healthy()
            return health["status"] == "ok" and health  # "degraded" while re-indexing a tier

        await wait_for(healthy, timeout=300, interval=0.5,
                       what="health ok (no re-index, no held tier left)")
        # nothing parked: a Zvec write failure must be redelivered, never dead-lettered + acked
        dlq = await harness.js.stream_info(topology.dlq_stream)
        assert dlq.state.messages == 0, proc.log_tail()
        # uvicorn re-raises SIGTERM after its graceful shutdown: -15 is a clean exit
        assert proc.stop() in (0, -15)
        assert proc.log_count("Application shutdown complete") == 1
        assert (tr_home / "memory" / ".indexer-clean-shutdown").exists()
    finally:
        await rows.close()
        await embed_sub.unsubscribe()
        if proc.alive:
            proc.kill9()
    repairs = proc.log_count("repaired ")
    hnsw_builds = proc.log_count("building the HNSW")
    quarantined = proc.log_count("cannot be opened")
    held = proc.log_count("the last HNSW build did not finish")
    print(f"\nkills (rows at kill, seconds): {kills}; torn Markdown tails repaired: {repairs}; "
          f"HNSW builds started: {hnsw_builds}; interrupted builds completed before writes: "
          f"{held}; tiers quarantined and re-indexed: {quarantined}; "
          f"total {time.monotonic() - t_start:.1f}s")
    assert len(kills) >= 3, f"the indexer finished before enough kills: {kills}"

    # --- Postgres: every key exactly once (primary key), complete, in its tier ----------------
    conn = await asyncpg.connect(pg_dsn)
    try:
        pg = await conn.fetch("SELECT key, tier, embedded, summary, detail FROM memories")
    finally:
        await conn.close()
    assert len(pg) == N and {r["key"] for r in pg} == set(by_key)
    for r in pg:
        ev = by_key[r["key"]].event
        assert r["embedded"] and r["tier"] == want_tier[r["key"]]
        assert (r["summary"], r["detail"]) == (ev.summary, ev.detail)

    # --- Zvec: every key in exactly one tier, the right one ---------------------------------
    tiers = ZvecTiers(tr_home / "zvec")
    tiers.open()
    try:
        found: dict[str, list[str]] = {}
        moved: list[str] = []  # another memory's vector (zvec can do that: adapters/build_guard.py)
        keys = list(by_key)
        for tier in TIERS:
            for i in range(0, N, 500):
                for key, doc in tiers.fetch(tier, keys[i: i + 500]).items():
                    found.setdefault(key, []).append(tier)
                    if not np.allclose(doc.vector, by_key[key].vector or [], atol=1e-6):
                        moved.append(key)
        assert {k: v for k, v in found.items() if len(v) != 1} == {}
        assert set(found) == set(by_key)
        assert moved == []
        assert all(found[k] == [want_tier[k]] for k in by_key)
        stats = tiers.stats()
        assert sum(int(s["doc_count"]) for s in stats.values()) == N, stats
        for ev in rng.sample(events, 10):  # and searchable by its own vector
            tier = want_tier[ev.event.key]
            hits = tiers.search(tier, ev.vector or [], 1, None, 128)
            assert hits[0].key == ev.event.key
    finally:
        tiers.close()

    # --- Markdown: every key exactly once, intact, no torn tail left ------------------------
    md_keys: dict[str, int] = {}
    parsed: dict[str, MemoryEvent] = {}
    daily = sorted((tr_home / "memory" / "daily").glob("*.md"))
    assert daily
    for path in daily:
        text = path.read_text(encoding="utf-8")
        assert find_torn_tail(text, file_header(date.fromisoformat(path.stem))) is None, path
        for block in iter_blocks(text):
            if block.kind == "event" and block.key:
                md_keys[block.key] = md_keys.get(block.key, 0) + 1
        parsed.update({r.key: r.event for r in parse_daily(text)})
    assert {k: n for k, n in md_keys.items() if n != 1} == {}
    assert set(md_keys) == set(by_key)
    assert all(parsed[k] == by_key[k].event for k in by_key)


# --- the Markdown log alone, killed inside its appends ----------------------------------------
_WRITER = r"""
import os, random, signal, sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
import totalrecall_indexer.adapters.markdown_log as markdown_log
from totalrecall_indexer.adapters.markdown_log import MarkdownLog
from totalrecall_schema.daily_log import LogRecord
from totalrecall_schema import EventMetadata, MemoryEvent

root, n, per_batch, tear = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(5)
words = ("disk", "full", "`df -h`", "✓", "日本語", "\n", "```", "## x", "<!-- y -->", "ok")
t0 = datetime(2026, 11, 18, 23, 0, tzinfo=UTC)
# model_construct: no validation (scrubbing 15 MB of text would take most of the run); the
# records therefore lack the host that validating their JSON back fills in, as records an
# older writer wrote would.
recs = [LogRecord(event=MemoryEvent.model_construct(
            id=f"w{i}", timestamp=t0 + timedelta(minutes=37 * i % 4000), namespace="default",
            category="file", subcategory="modify", actor="system", source="test",
            summary=f"file {i} changed",
            detail=" ".join(rng.choice(words) for _ in range(rng.randint(200, 2000))),
            metadata=EventMetadata(tags=["t"])), repeat_count=1 + (i % 7 == 0))
        for i in range(n)]
if tear >= 0:
    # Killed inside the `tear`-th write of this run (batches already on disk write nothing),
    # after a random part of its bytes: what a SIGKILL in the middle of a write(2) leaves.
    appends, cut = [0], random.Random(tear)
    class Torn:
        def __init__(self, fh):
            self.fh = fh
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)
        def write(self, data):
            self.fh.write(data[: cut.randrange(1, len(data))])
            self.fh.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        def __getattr__(self, name):
            return getattr(self.fh, name)
    def tearing_open(path, mode="r", *args, **kwargs):
        fh = open(path, mode, *args, **kwargs)
        if mode == "ab":
            appends[0] += 1
            if appends[0] == tear:
                return Torn(fh)
        return fh
    markdown_log.open = tearing_open
log = MarkdownLog(root)  # a restart: repair torn tails, then "redeliver" every batch
log.recover()
print("ready", flush=True)
for start in range(0, n, per_batch):
    log.append(recs[start: start + per_batch])
print("done", flush=True)
"""


def _run_writer(root: Path, n: int, per_batch: int, tear: int = -1) -> Any:
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root), str(n), str(per_batch), str(tear)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def _torn_tails(daily: Path) -> int:
    return sum(find_torn_tail(path.read_text(encoding="utf-8", errors="surrogateescape"),
                              file_header(date.fromisoformat(path.stem))) is not None
               for path in daily.glob("*.md"))


def test_markdown_writer_killed_at_random_ends_byte_identical(tmp_path: Path) -> None:
    import os
    import signal

    n, per_batch = 1200, 150
    ref = tmp_path / "reference"
    p = _run_writer(ref, n, per_batch)
    assert p.wait(120) == 0
    work = tmp_path / "killed"
    rng = random.Random(99)
    torn = kills = torn_writes = 0
    for i in range(12):
        if i % 2:  # killed inside one of its next writes, a random part of it on disk
            p = _run_writer(work, n, per_batch, tear=rng.randint(1, 3))
            rc = p.wait(120)
            assert rc in (0, -signal.SIGKILL)  # 0: it had fewer writes left than that
            kills += rc != 0
            torn_writes += rc != 0
        else:  # killed at a random moment (the write itself is ~1 % of an append)
            p = _run_writer(work, n, per_batch)
            assert p.stdout is not None and p.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0.0, 0.4))
            if p.poll() is not None:
                continue
            os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
            kills += 1
        torn += _torn_tails(work / "daily")
    p = _run_writer(work, n, per_batch)
    assert p.wait(120) == 0
    # Every torn state is also covered byte by byte in tests/unit/indexer/test_indexer_markdown_crash.
    print(f"\nmarkdown writer: {kills} kills ({torn_writes} inside a write), {torn} torn tails "
          "left behind and repaired")
    assert kills >= 8 and torn_writes >= 3 and torn >= 3
    assert _torn_tails(work / "daily") == 0
    ref_files = sorted(q.name for q in (ref / "daily").glob("*.md"))
    assert ref_files == sorted(q.name for q in (work / "daily").glob("*.md"))
    for name in ref_files:
        assert (work / "daily" / name).read_bytes() == (ref / "daily" / name).read_bytes(), name
    assert len(list((work / ".recovered").glob("*.torn.md"))) >= torn
