"""The term statistics the triggers keep (migration 12) on a real Postgres: after every kind of
write to `memories` they are what aggregating every memory's words gives, and concurrent writers
of the same words never deadlock."""

from __future__ import annotations

import asyncio

import asyncpg
from indexer_it_helpers import assert_counts_exact, write_memories
from totalrecall_indexer.adapters.pg_schema import migrate


async def test_the_counts_follow_every_write(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await migrate(conn)
        await write_memories(conn, [("a", "ops", "nginx.service failed: port 8080 in use"),
                            ("b", "ops", "nginx.service reloaded"),
                            ("c", "chat", "the user prefers neovim")])
        await assert_counts_exact(conn)
        assert await conn.fetchval(
            "SELECT ndoc FROM term_stats WHERE namespace = 'ops' AND lexeme = 'nginx.service'"
        ) == 2
        # A redelivery and a repeat (same text), a new text, a move to another namespace, all
        # in one upsert: the inserted rows and the updated ones are both counted.
        await write_memories(conn, [("a", "ops", "nginx.service failed: port 8080 in use"),
                            ("b", "ops", "redis.service OOM killed worker 7"),
                            ("c", "ops", "the user prefers neovim"),
                            ("d", "chat", "a new turn about vim")])
        await assert_counts_exact(conn)
        await conn.execute("UPDATE memories SET tier = 'warm', superseded_by = 'x'")
        await assert_counts_exact(conn)
        await conn.execute("DELETE FROM memories WHERE key IN ('b', 'd')")
        await assert_counts_exact(conn)
        # A word no memory holds any more is gone, not kept at 0; so is an empty namespace.
        assert await conn.fetchval(
            "SELECT count(*) FROM term_stats WHERE lexeme = 'redis.service' OR ndoc <= 0") == 0
        assert await conn.fetchval(
            "SELECT count(*) FROM namespace_stats WHERE namespace = 'chat'") == 0
        await conn.execute("TRUNCATE memories")  # a rebuild from the Markdown logs starts so
        assert await conn.fetchval("SELECT count(*) FROM term_stats") == 0
        assert await conn.fetchval("SELECT count(*) FROM namespace_stats") == 0
    finally:
        await conn.close()


async def test_writers_of_the_same_words_at_once_never_deadlock(pg_dsn: str) -> None:
    """Two writers, each upserting batches that share words in opposite orders of their keys:
    every statement takes the counts' rows in one order, so neither waits on the other in a
    cycle (Postgres would abort one with a deadlock error), and the counts stay exact."""
    conn = await asyncpg.connect(pg_dsn)
    pool = await asyncpg.create_pool(pg_dsn, min_size=2, max_size=2)
    try:
        await migrate(conn)
        words = [f"w{i}" for i in range(40)]

        async def writer(n: int) -> None:
            for batch in range(30):
                order = words if n == 0 else words[::-1]
                rows = [(f"{n}-{batch}-{i}", "ops", f"{w} {order[(i + 1) % 40]} shared")
                        for i, w in enumerate(order)]
                async with pool.acquire() as c, c.transaction():
                    await write_memories(c, rows)
                    # and a second statement in the same transaction, as the indexer's
                    # supersede step runs after its upsert
                    await c.execute("UPDATE memories SET summary = summary || ' again' "
                                    "WHERE key = ANY($1::text[])", [k for k, _, _ in rows[:5]])

        await asyncio.wait_for(asyncio.gather(writer(0), writer(1)), 120)
        await assert_counts_exact(conn)
    finally:
        await pool.close()
        await conn.close()

