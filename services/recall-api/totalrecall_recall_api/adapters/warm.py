"""A new Postgres connection made ready before a recall needs it.

The first statements on a new connection cost several times what they cost on a used one:
asyncpg looks up the types it has no codec for (the lexemes' `smallint[]`, the word list's
`bool[]`), the backend reads the catalog entries of `memories` and its indexes, and each
statement is parsed and prepared. A recall's keyword search took ~25 ms on a new connection
against ~5 ms on a used one (docs/perf/2026-11-28-recall-stages.md); the first recalls after a
start, which also grew the pools, queued behind that. So the pools open their connections at
start (`pg_pool_min`) and `warm` runs the statements of a recall once on each, as the pool's
`init`: also on a connection opened later, or again after Postgres restarted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import cast

import asyncpg

from .postgres import PostgresStore
from .termstats import TermStats

log = logging.getLogger("totalrecall.recall.postgres")

#: No memory has it: each statement runs and finds nothing.
WARM_NAMESPACE = "totalrecall-warm-up"


async def warm(conn: asyncpg.Connection, *, generic: bool, categories: Sequence[str],
               prefix_min_chars: int, timeout: float | None) -> None:
    """Run once on `conn` what recall runs on its pool: on the pool of generic plans the
    lookups by key, neighbours, repeats and the diagnostic lookup of `categories`; on the other
    the keyword search (its words' lexemes and counts too). Best effort: a store the
    indexer has not created yet leaves the connection as it is (its statements are prepared
    when first used)."""
    # The statements `warm` runs take only `fetch` and `fetchrow`, which a connection has too.
    one = cast(asyncpg.Pool, conn)
    store = PostgresStore(one, TermStats(one, max_age_s=0, prefix_min_chars=prefix_min_chars),
                          generic_pool=one, timeout=timeout, prefix_min_chars=prefix_min_chars)
    key = f"{WARM_NAMESPACE}:none"
    try:
        if generic:
            await store.rows([key])
            await store.neighbours([key], 1, 1.0, known=[key])
            await store.newest_of_templates(WARM_NAMESPACE, [key], None, None, None, 1)
            await store.recent_rows(WARM_NAMESPACE, None, None, 1, categories)
        else:
            await store.bm25_rows(["memory"], WARM_NAMESPACE, None, None, 1)
    except (asyncpg.PostgresError, OSError, TimeoutError) as exc:
        log.info("a new Postgres connection was not warmed up (%s): its statements are "
                 "prepared when first used", exc or type(exc).__name__)
