"""Superseded memories in the real Postgres mirror (migration 8 and `PgStore._mark_superseded`):
a newer fact about the same subject replaces the older ones, whatever order they arrive in, and a
memory can name the ones it replaces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from totalrecall_indexer.adapters.pgstore import PgRow, PgStore
from totalrecall_schema import MemoryEvent, memory_key
from totalrecall_schema.daily_log import LogRecord

T0 = datetime.now(UTC) - timedelta(days=3)


def _row(id: str, summary: str, hours: float, **metadata: Any) -> PgRow:
    ev = MemoryEvent(id=id, namespace="ns", timestamp=T0 + timedelta(hours=hours),
                     category="user_pattern", subcategory="preference", summary=summary,
                     metadata=metadata)
    return PgRow(rec=LogRecord(event=ev, embedded=False), tier="hot", embedded=False)


async def _superseded(dsn: str) -> dict[str, str | None]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT id, superseded_by FROM memories ORDER BY id")
    finally:
        await conn.close()
    return {r["id"]: r["superseded_by"] for r in rows}


async def test_newest_fact_of_a_subject_supersedes_the_older_ones_in_any_order(
        pg_dsn: str) -> None:
    store = PgStore(pg_dsn)
    await store.start()
    try:
        await store.upsert([_row("vim", "User prefers vim", 0, subject="prefers:editor"),
                            _row("tabs", "User prefers tabs", 1, subject="prefers:indentation")])
        assert await _superseded(pg_dsn) == {"tabs": None, "vim": None}
        await store.upsert([_row("neovim", "User now prefers neovim", 5,
                                 subject="prefers:editor")])
        assert await _superseded(pg_dsn) == {"neovim": None, "tabs": None,
                                             "vim": memory_key("ns", "neovim")}
        # An older fact arriving late (a replay, a rebuild) is superseded at once; the newest
        # stays current.
        await store.upsert([_row("emacs", "User prefers emacs", 2, subject="prefers:editor")])
        got = await _superseded(pg_dsn)
        assert got["emacs"] == got["vim"] == memory_key("ns", "neovim") and got["neovim"] is None
        # The same memory again (idempotent re-delivery) changes nothing.
        await store.upsert([_row("neovim", "User now prefers neovim", 5,
                                 subject="prefers:editor")])
        assert await _superseded(pg_dsn) == got
        # The newest forgotten (deleted): the next newest of its subject is current again.
        assert await store.delete([memory_key("ns", "neovim")]) == [memory_key("ns", "neovim")]
        assert await _superseded(pg_dsn) == {"emacs": None, "tabs": None,
                                             "vim": memory_key("ns", "emacs")}
    finally:
        await store.close()


async def test_a_memory_names_what_it_supersedes(pg_dsn: str) -> None:
    store = PgStore(pg_dsn)
    await store.start()
    try:
        await store.upsert([_row("port", "staging database listens on 5432", 0)])
        await store.upsert([_row("port2", "staging database now listens on 6543", 1,
                                 supersedes=["port", "no-such-id"])])
        assert await _superseded(pg_dsn) == {"port": memory_key("ns", "port2"), "port2": None}
        # The replacement forgotten: the old fact is current again.
        await store.delete([memory_key("ns", "port2")])
        assert await _superseded(pg_dsn) == {"port": None}
    finally:
        await store.close()
