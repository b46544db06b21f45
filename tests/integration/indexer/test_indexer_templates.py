"""Each memory's template in the real Postgres mirror (migration 9): the template of its summary
as recall computes it (`totalrecall_schema.templates.template_hash`), written with every upsert."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
from totalrecall_indexer.adapters.pgstore import PgRow, PgStore
from totalrecall_schema import MemoryEvent
from totalrecall_schema.daily_log import LogRecord
from totalrecall_schema.templates import template_hash

T0 = datetime(2008, 11, 9, 20, 0, tzinfo=UTC)


def _row(id: str, summary: str, minutes: int) -> PgRow:
    ev = MemoryEvent(id=id, namespace="hdfs", timestamp=T0 + timedelta(minutes=minutes),
                     category="system.service", summary=summary)
    return PgRow(rec=LogRecord(event=ev, embedded=False), tier="cold", embedded=False)


async def test_every_memory_carries_the_template_of_its_summary(pg_dsn: str) -> None:
    store = PgStore(pg_dsn)
    await store.start()
    try:
        await store.upsert([_row("a", "PacketResponder 1 for block blk_11 terminating", 0),
                            _row("b", "PacketResponder 2 for block blk_-12 terminating", 1),
                            _row("c", "Verification succeeded for blk_13", 2)])
        conn = await asyncpg.connect(pg_dsn)
        try:
            got = {r["id"]: r["template"] for r in await conn.fetch(
                "SELECT id, template FROM memories")}
        finally:
            await conn.close()
    finally:
        await store.close()
    assert got["a"] == got["b"] == template_hash("PacketResponder 0 for block blk_9 terminating")
    assert got["c"] == template_hash("Verification succeeded for blk_13") != got["a"]
