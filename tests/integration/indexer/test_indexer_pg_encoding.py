"""A database created without an encoding (SQL_ASCII: an initdb with no locale, as a bare
container's) cannot run keyword search; the indexer says so once at start, with the fix."""

from __future__ import annotations

import logging
import uuid

import asyncpg
import pytest
from totalrecall_indexer.adapters.pgstore import PgStore


async def test_a_sql_ascii_database_is_named_at_start(
        pg_server_dsn: str, caplog: pytest.LogCaptureFixture) -> None:
    name = f"t_ascii_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(pg_server_dsn)
    try:
        await admin.execute(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' TEMPLATE template0 "
                            "LC_COLLATE 'C' LC_CTYPE 'C'")
    finally:
        await admin.close()
    dsn = pg_server_dsn.rsplit("/", 1)[0] + f"/{name}"
    # what keyword search trips on there (the prefix ranges of the word counts)
    conn = await asyncpg.connect(dsn)
    try:
        with pytest.raises(asyncpg.PostgresError, match="too large for encoding"):
            await conn.fetchval("SELECT 'disk' || chr(1114111)")
    finally:
        await conn.close()
    store = PgStore(dsn)
    with caplog.at_level(logging.ERROR, logger="totalrecall.indexer"):
        await store.start()
    await store.close()
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(said) == 1 and "encoding is SQL_ASCII, not UTF8" in said[0]
    assert "POSTGRES_INITDB_ARGS=--encoding=UTF8" in said[0]


async def test_a_utf8_database_says_nothing(pg_dsn: str, caplog: pytest.LogCaptureFixture,
                                            ) -> None:
    store = PgStore(pg_dsn)
    with caplog.at_level(logging.ERROR, logger="totalrecall.indexer"):
        await store.start()
    await store.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
