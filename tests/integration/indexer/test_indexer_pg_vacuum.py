"""The Postgres mirror is vacuumed (visibility map) once enough rows arrived, and analysed
once it changed by a fifth."""

from __future__ import annotations

import asyncpg
import psutil
from indexer_it_helpers import wait_for
from totalrecall_indexer.adapters.pgstore import PgStore


async def _insert(conn: asyncpg.Connection, prefix: str, n: int) -> None:
    """`n` memories, keyed `prefix` + 1 … n."""
    await conn.execute("""
        INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor, source,
                              severity, summary)
        SELECT $1 || i, $1 || 'id' || i, 'default', now(), 'system.service', 'fail', 'system',
               'test', 'error', 'unit ' || i || ' failed'
        FROM generate_series(1, $2::int) AS i""", prefix, n)


async def _inserted_since_vacuum(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(
        "SELECT coalesce(n_ins_since_vacuum, 0) FROM pg_stat_user_tables "
        "WHERE relname = 'memories'") or 0)


async def test_vacuum_runs_after_enough_inserts_and_only_then(pg_dsn: str) -> None:
    store = PgStore(pg_dsn)
    await store.start()
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _insert(conn, "k", 300)
        assert await store.vacuum_if_grown(1000) == 0  # not enough yet
        # Postgres publishes its table statistics asynchronously (at most ~1 s later).
        await wait_for(lambda: _grown(conn), timeout=15, what="insert statistics")
        assert await store.vacuum_if_grown(200) >= 300
        assert await _inserted_since_vacuum(conn) == 0
        # The word counts, whose rows every insert updates, with it (autovacuum's workers
        # would run beside recall at the server's priority).
        vacuumed = {r["relname"]: r["done"] for r in await conn.fetch(
            "SELECT relname, last_vacuum IS NOT NULL AND last_analyze IS NOT NULL AS done "
            "FROM pg_stat_user_tables")}
        assert vacuumed["memories"] and vacuumed["term_stats"] and vacuumed["namespace_stats"]
        assert await store.vacuum_if_grown(200) == 0  # nothing new since
        assert await store.vacuum_if_grown(0) == 0  # disabled
        # A few more rows: vacuumed (the visibility map of the newest rows), but the
        # statistics of a table that changed by less than a fifth are left as they are.
        analysed = await _stat(conn, "analyze_count")
        await _insert(conn, "n", 40)
        await wait_for(lambda: _grown(conn, 40), timeout=15, what="insert statistics")
        assert await store.vacuum_if_grown(20) == 40
        assert await _inserted_since_vacuum(conn) == 0
        assert await _stat(conn, "analyze_count") == analysed
    finally:
        await conn.close()
        await store.close()


async def test_autovacuum_analyses_the_mirror_only_as_a_backstop(pg_dsn: str) -> None:
    """The indexer analyses `memories` once a fifth changed; autovacuum's own threshold is
    past it, so its worker (at the server's priority) does not come first."""
    store = PgStore(pg_dsn)
    await store.start()
    conn = await asyncpg.connect(pg_dsn)
    try:
        options = {r["relname"]: set(r["reloptions"] or []) for r in await conn.fetch(
            "SELECT relname, reloptions FROM pg_class WHERE relname = ANY($1::text[])",
            ["memories", "term_stats", "namespace_stats"])}
        assert "autovacuum_analyze_scale_factor=0.4" in options["memories"]
        assert "autovacuum_analyze_scale_factor=0.4" in options["term_stats"]
        assert "autovacuum_analyze_threshold=1000000" in options["namespace_stats"]
    finally:
        await conn.close()
        await store.close()


async def _grown(conn: asyncpg.Connection, rows: int = 300) -> bool:
    return await _inserted_since_vacuum(conn) >= rows


async def _stat(conn: asyncpg.Connection, column: str) -> int:
    return int(await conn.fetchval(
        f"SELECT {column} FROM pg_stat_user_tables WHERE relname = 'memories'") or 0)


async def test_the_indexers_postgres_backends_run_at_the_background_priority(pg_dsn: str) -> None:
    store = PgStore(pg_dsn, backend_nice=6)
    await store.start()
    try:
        assert store.pool is not None
        async with store.pool.acquire() as conn:
            pid = conn.get_server_pid()
        # The test's Postgres runs on this machine, as a user this test may renice.
        assert psutil.Process(pid).nice() >= 6
    finally:
        await store.close()


async def test_analyze_skips_the_columns_no_query_filters_on(pg_dsn: str) -> None:
    """The text, tags and metadata of a memory get no planner statistics (the costliest
    part of an `ANALYZE`); the columns queries filter on keep theirs."""
    store = PgStore(pg_dsn)
    await store.start()
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _insert(conn, "s", 500)
        await conn.execute("UPDATE memories SET metadata = jsonb_build_object('subject', "
                           "'unit ' || (length(key) % 3)) WHERE key LIKE 's1%'")
        await conn.execute("ANALYZE memories")
        analysed = {r["attname"] for r in await conn.fetch(
            "SELECT attname FROM pg_stats WHERE tablename = 'memories'")}
        assert {"namespace", "ts", "category", "tsv", "key"} <= analysed
        assert not {"summary", "detail", "tags", "metadata"} & analysed
        # The expression index on the metadata's subject keeps the statistics of its own.
        assert await conn.fetchval(
            "SELECT count(*) FROM pg_statistic "
            "WHERE starelid = 'memories_ns_subject_ts'::regclass") >= 1
    finally:
        await conn.close()
        await store.close()
