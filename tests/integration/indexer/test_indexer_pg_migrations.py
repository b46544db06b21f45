"""Schema migrations on a real Postgres: an existing table is upgraded in place."""

from __future__ import annotations

import json

import asyncpg
from indexer_it_helpers import assert_counts_exact, write_memories
from totalrecall_indexer.adapters.pg_schema import MIGRATIONS, TSV_INDEX_MAX_BYTES, migrate
from totalrecall_schema.host import HostInfo


async def _database_at(conn: asyncpg.Connection, version: int) -> None:
    """A database as the indexer left it after migration `version`."""
    for _version, _desc, sql in MIGRATIONS[:version]:
        await conn.execute(sql)
    await conn.execute("""CREATE TABLE schema_migrations (
        version integer PRIMARY KEY, description text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now())""")
    await conn.executemany("INSERT INTO schema_migrations (version, description) "
                           "VALUES ($1, $2)", [(v, d) for v, d, _ in MIGRATIONS[:version]])


async def test_thread_column_is_filled_for_rows_written_before_it(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _database_at(conn, 3)
        rows = [("turn", "eval", "conversation", {"session": "s1"}),
                ("flush", "agent", "conversation", {"session_id": "chat-7"}),
                ("unit", "journald", "system.service", {"service": "nginx"}),
                ("disk", "storage", "system.storage", {})]
        await conn.executemany(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor,
                                     source, severity, summary, metadata)
               VALUES ($1, $1, 'default', now(), $3, 'general', 'system', $2, 'info', $1,
                       $4::jsonb)""", [(k, s, c, json.dumps(m)) for k, s, c, m in rows])

        assert await migrate(conn) == [v for v, _, _ in MIGRATIONS[3:]]
        got = dict(await conn.fetch("SELECT key, thread FROM memories"))
        assert got == {"turn": "c\x1fs1", "flush": "c\x1fchat-7",
                       "unit": "s\x1fjournald\x1fnginx", "disk": "k\x1fstorage\x1fsystem.storage"}
        assert await migrate(conn) == []  # idempotent
        indexes = {r["indexname"] for r in await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")}
        assert "memories_ns_thread_ts" in indexes
    finally:
        await conn.close()


async def test_the_old_bm25_covering_index_is_replaced(pg_dsn: str) -> None:
    """A database that built migration 3's covering index (every row's tsv) gets the split
    pair, and long memories can be written again."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _database_at(conn, 4)
        await conn.execute("CREATE INDEX memories_ns_ts_tsv ON memories (namespace, ts) "
                           "INCLUDE (key, tsv)")  # what migration 3 used to build
        assert await migrate(conn) == [v for v, _, _ in MIGRATIONS[4:]]
        indexes = {r["indexname"] for r in await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")}
        assert "memories_ns_ts_tsv" not in indexes
        assert {"memories_ns_ts_tsv_fits", "memories_ns_ts_tsv_big"} <= indexes
        words = " ".join(f"w{i}x{i * 7919 % 10007}" for i in range(1500))
        await conn.execute(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor,
                                     source, severity, summary, detail)
               VALUES ('long', 'long', 'default', now(), 'conversation', 'general', 'user',
                       'api', 'info', 'a long one', $1)""", words)
        assert await conn.fetchval("SELECT tsv_fits FROM memories WHERE key = 'long'") is False
    finally:
        await conn.close()


async def test_identifiers_join_the_full_text_vector_of_existing_rows(pg_dsn: str) -> None:
    """A database at migration 5 gets identifiers (whole and in parts) into every row's tsv:
    an IP without its slash and port, a Spark partition id whole, a path's parts, a user."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _database_at(conn, 5)
        lines = {"recv": "Receiving block blk_-1608999687919862906 src: /10.250.10.6:40524",
                 "rdd": "Partition rdd_42_18 not found, computing it",
                 "del": "Deleting block blk_-1492 file /mnt/hadoop/dfs/data/current/subdir25/blk_-1492",
                 "ssh": "Accepted publickey for deploy@build-07 from 183.62.140.253 port 49870"}
        await conn.executemany(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor,
                                     source, severity, summary)
               VALUES ($1, $1, 'default', now(), 'system.service', 'general', 'system',
                       'journal', 'info', $2)""", list(lines.items()))
        before = await conn.fetchval("SELECT count(*) FROM memories WHERE tsv @@ $1::tsquery",
                                     "'10.250.10.6'")
        assert before == 0  # the english parser kept the slash and dropped the port

        assert await migrate(conn) == [v for v, _, _ in MIGRATIONS[5:]]

        async def found(lexeme: str) -> set[str]:
            rows = await conn.fetch("SELECT key FROM memories WHERE tsv @@ $1::tsquery",
                                    "'" + lexeme + "'")
            return {r["key"] for r in rows}

        assert await found("10.250.10.6") == {"recv"}
        assert await found("10.250.10.6:40524") == {"recv"}
        assert await found("rdd_42_18") == {"rdd"}
        assert await found("subdir25") == {"del"}
        assert await found("blk_-1492") == {"del"}
        assert await found("deploy") == {"ssh"} == await found("deploy@build-07")
        assert await found("183.62.140.253") == {"ssh"}
        # the query side parses a question with the same function
        got = await conn.fetchval("SELECT tr_identifiers($1)",
                                  "what happened to blk_-1608999687919862906 on 10.250.10.6?")
        assert set(got) == {"blk_-1608999687919862906", "10.250.10.6"}
        indexes = {r["indexname"] for r in await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")}
        assert {"memories_tsv_gin", "memories_ns_ts_tsv_fits", "memories_ns_ts_tsv_big"} <= indexes
        # new rows get it too (the trigger fills it), and tsv_fits agrees with it
        await conn.execute(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor,
                                     source, severity, summary)
               VALUES ('new', 'new', 'default', now(), 'system.service', 'general', 'system',
                       'journal', 'info', 'Invalid user admin from 103.99.0.122:22')""")
        assert await found("103.99.0.122") == {"new"}
        assert await conn.fetchval("SELECT bool_and(tsv_fits) FROM memories")
    finally:
        await conn.close()


async def test_the_trigger_fills_the_tsv_as_the_generated_column_did(pg_dsn: str) -> None:
    """Migration 11: rows written before keep their tsv; a new row's tsv, and that of a row
    whose text changes, is `tr_tsv` of its text (what the generated column held), sized into
    `tsv_fits`; an update that leaves the text alone keeps them."""
    conn = await asyncpg.connect(pg_dsn)
    insert = """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor, source,
                                      severity, summary, detail)
                VALUES ($1, $1, 'default', now(), 'system.service', 'general', 'system',
                        'journal', 'info', $2, $3)
                ON CONFLICT (key) DO UPDATE SET summary = EXCLUDED.summary,
                                                detail = EXCLUDED.detail,
                                                repeat_count = memories.repeat_count + 1"""
    consistent = """SELECT bool_and(tsv = tr_tsv(summary, detail)
                                    AND tsv_fits = (pg_column_size(tsv || ''::tsvector) <= $1))
                    FROM memories"""
    try:
        await _database_at(conn, 10)
        await conn.execute(insert, "old", "Invalid user admin from 103.99.0.122:22", "")
        before = await conn.fetchval("SELECT tsv FROM memories WHERE key = 'old'")
        assert await migrate(conn) == [v for v, _, _ in MIGRATIONS[10:]]
        assert await conn.fetchval("SELECT tsv FROM memories WHERE key = 'old'") == before
        assert await conn.fetchval(
            "SELECT is_generated FROM information_schema.columns "
            "WHERE table_name = 'memories' AND column_name = 'tsv'") == "NEVER"
        long_text = " ".join(f"w{i}x{i * 7}" for i in range(600))  # a tsv too big for a btree
        await conn.execute(insert, "new", "nginx restarted on build-07", "exit code 137")
        await conn.execute(insert, "long", "a long chat turn", long_text)
        await conn.execute(insert, "old", "Invalid user admin from 103.99.0.122:22", "")  # same
        await conn.execute(insert, "new", "nginx stopped on build-08", "")  # the text changed
        fits = dict(await conn.fetch("SELECT key, tsv_fits FROM memories"))
        assert fits == {"old": True, "new": True, "long": False}
        assert await conn.fetchval(consistent, TSV_INDEX_MAX_BYTES)
        assert await conn.fetchval("SELECT repeat_count FROM memories WHERE key = 'old'") == 2
        assert await conn.fetchval(
            "SELECT count(*) FROM memories WHERE tsv @@ to_tsquery('english', 'build-08')") == 1
        await conn.execute("UPDATE memories SET detail = $1 WHERE key = 'long'", "short now")
        assert await conn.fetchval("SELECT tsv_fits FROM memories WHERE key = 'long'")
        assert await conn.fetchval(consistent, TSV_INDEX_MAX_BYTES)
    finally:
        await conn.close()


async def test_a_store_written_before_the_term_counts_is_counted_by_their_migration(
        pg_dsn: str) -> None:
    """Migration 12 counts what the store already holds, and its triggers everything after."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _database_at(conn, 11)
        await write_memories(conn, [(f"k{i}", f"ns{i % 3}", f"sshd session {i} for user u{i % 7}")
                                    for i in range(60)])
        assert await migrate(conn) == [v for v, _, _ in MIGRATIONS[11:]]
        await assert_counts_exact(conn)
        await write_memories(conn, [("k1", "ns1", "sshd session closed"), ("new", "ns0", "a")])
        await assert_counts_exact(conn)
        assert await migrate(conn) == []
    finally:
        await conn.close()


async def test_host_is_filled_for_rows_written_before_it(pg_dsn: str) -> None:
    """Migration 15: a row a watcher wrote keeps the host it named (normalised), one without a
    host is the migrating machine's (with its id), and new writes fill the column from the
    metadata; recall's filter and the hosts of a namespace are index walks."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _database_at(conn, 14)
        rows = [("watched", {"host": " Web-01. ", "service": "nginx"}),
                ("api", {"severity": "info"}),
                ("blank", {"host": ""}),
                ("named-here", {"host": "here"}),
                ("other-id", {"host": "db-01", "machine_id": "b" * 32}),
                ("structured", {"host": {"name": "WS-1", "ips": ["10.0.0.7"]}}),
                ("nameless", {"host": {"ips": ["10.0.0.8"]}})]
        await conn.executemany(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor,
                                     source, severity, summary, metadata)
               VALUES ($1, $1, 'default', now(), 'system.service', 'general', 'system', 'api',
                       'info', $1, $2::jsonb)""", [(k, json.dumps(m)) for k, m in rows])
        assert await migrate(conn, HostInfo("here", "a" * 32)) == [15, 16, 17, 18]
        got = {r["key"]: (r["host"], json.loads(r["metadata"]))
               for r in await conn.fetch("SELECT key, host, metadata FROM memories")}
        # the metadata as the event gave it; the column normalised
        assert got["watched"] == ("web-01", {"host": " Web-01. ", "service": "nginx"})
        assert got["api"] == ("here", {"severity": "info", "host": "here", "machine_id": "a" * 32})
        assert got["blank"] == ("here", {"host": "here", "machine_id": "a" * 32})
        assert got["named-here"] == ("here", {"host": "here", "machine_id": "a" * 32})
        assert got["other-id"] == ("db-01", {"host": "db-01", "machine_id": "b" * 32})
        # a structured host a client stored is kept; its name is the host
        assert got["structured"] == ("ws-1", {"host": {"name": "WS-1", "ips": ["10.0.0.7"]}})
        assert got["nameless"] == (None, {"host": {"ips": ["10.0.0.8"]}})
        await conn.execute(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor, source,
                                     severity, summary, metadata)
               VALUES ('new', 'new', 'default', now(), 'error', 'general', 'system', 'api',
                       'error', 'x', '{"host": "db-02"}'::jsonb)""")
        assert await conn.fetchval("SELECT host FROM memories WHERE key = 'new'") == "db-02"
        indexes = {r["indexname"] for r in await conn.fetch(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")}
        assert "memories_ns_host_ts" in indexes
        assert await migrate(conn) == []
    finally:
        await conn.close()


async def test_the_keyword_index_pending_list_stays_small(pg_dsn: str) -> None:
    """Migration 18: rows inserted between two vacuums do not pile up in the GIN index's pending
    list, which every keyword lookup reads end to end; the inserting backend merges it once it
    passes 64 kB, and the rows stay findable."""
    conn = await asyncpg.connect(pg_dsn)
    try:
        await _database_at(conn, 17)
        assert await migrate(conn) == [18]
        await conn.execute("ALTER TABLE memories SET (autovacuum_enabled = false)")
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")  # contrib: the reader
        words = " ".join(f"word{i}" for i in range(200))  # a long turn: ~200 lexemes
        await conn.execute(
            """INSERT INTO memories (key, id, namespace, ts, category, subcategory, actor,
                                     source, severity, summary)
               SELECT 'k' || i, 'k' || i, 'default', now(), 'conversation', 'general', 'user',
                      'api', 'info', 'turn ' || i || ' ' || $1
               FROM generate_series(1, 400) AS i""", words)
        pending_bytes = await conn.fetchval(
            "SELECT (pgstatginindex('memories_tsv_gin')).pending_pages * "
            "current_setting('block_size')::int")
        # 400 such rows are ~1 MB of pending entries under the default 4 MB limit
        assert pending_bytes <= 64 * 1024 + 8192
        found = await conn.fetchval(
            "SELECT count(*) FROM memories WHERE tsv @@ to_tsquery('simple', 'word199')")
        assert found == 400
    finally:
        await conn.close()
