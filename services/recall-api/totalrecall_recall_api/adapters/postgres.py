"""The recall API's read-only access to the indexer's Postgres mirror (`memories`): rows by key,
a hit's neighbours in its thread, the recent and notable ones, a template's newest, sessions,
hosts, statistics and export. The keyword search is `keyword_search.py`."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Collection, Sequence
from datetime import datetime
from typing import Any

import asyncpg
from totalrecall_schema import Memory

from ..core.continuity import NOTABLE_CATEGORIES, NOTABLE_SUBCATEGORIES
from ..ports import CategoryFilter, Row
from .keyword_search import KeywordSearch, any_of
from .records import COLUMNS_M, MEMORY_COLUMNS, MemoryRecord, memory_of
from .termstats import TermStats
from .tsquery import PREFIX_MIN_CHARS

_EXPORT_SQL = ("SELECT id, namespace, ts, category, subcategory, actor, source, summary, detail, "
               "metadata, repeat_count, last_seen FROM memories WHERE namespace = $1 "
               "ORDER BY key")

#: The indexer's `thread` column (its migration 4) starts with this for a conversation (chr(31)
#: separates its parts); other threads are a source's events about one service or category.
_CONVERSATION_THREAD = "c\x1f"


#: The sessions of `PostgresStore.generic_pool`: each statement planned once, and its plan kept
#: until the table's statistics change. A plan made on a new store (a few rows, where reading
#: the whole table is cheapest) would stay a sequential scan as the table grows, so these
#: sessions never scan a table whole: their statements are index walks by design.
GENERIC_PLANS = {"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off"}


def _literal(text: str) -> str:
    """`text` as an SQL string literal (a category name: one of a fixed set, quoted all the same)."""
    return "'" + text.replace("'", "''") + "'"


class PostgresStore(KeywordSearch):
    """Read-only access to the indexer's `memories` table: the keyword search
    (`keyword_search.py`), and rows by key, by thread, by time and by template here."""

    def __init__(self, pool: asyncpg.Pool, term_stats: TermStats | None = None,
                 scan_cap: int = 500, timeout: float | None = None,
                 prefix_min_chars: int = PREFIX_MIN_CHARS, max_terms: int = 8,
                 max_df_ratio: float = 0.2, generic_pool: asyncpg.Pool | None = None) -> None:
        self.pool = pool
        #: Connections whose sessions plan a statement once (`GENERIC_PLANS`), for the lookups
        #: whose plan is the same whatever their values (`pool` when None): rows by key, and
        #: walks of an index driven by rows the statement itself finds (a hit's neighbours, a
        #: template's newest repeats), whose values no plan sees. Their bounds are written as
        #: index conditions in a plan that cannot see the values (a missing bound is an
        #: infinite one, not an `IS NULL OR` the plan must test per row). Planning them for
        #: every recall was a good part of Postgres's time per recall
        #: (docs/perf/2026-11-27-plan-cache.md). A lookup by a value whose frequency decides
        #: the index (a category) stays with `pool`, unless the value is written into the
        #: statement (the diagnostic lookup's categories, `recent_rows`).
        self.generic_pool = pool if generic_pool is None else generic_pool
        self.max_terms, self.max_df_ratio = max_terms, max_df_ratio
        self.prefix_min_chars = prefix_min_chars  # 0: exact lexemes only
        self.term_stats = term_stats
        self.scan_cap = scan_cap
        self.timeout = timeout  # per statement; None = no limit
        self._lexeme_cache: OrderedDict[
            str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = OrderedDict()

    async def rows(self, keys: Sequence[str]) -> dict[str, Row]:
        if not keys:
            return {}
        rows = await self.generic_pool.fetch(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE key = ANY($1::text[])", list(keys),
            timeout=self.timeout, record_class=MemoryRecord)
        return {r["key"]: r for r in rows}

    async def neighbours(self, keys: Sequence[str], window: int, max_gap_s: float,
                         since: datetime | None = None, category: CategoryFilter = None,
                         event_gap_s: float | None = None, known: Collection[str] = ()
                         ) -> dict[str, list[tuple[str, Row | None]]]:
        """For each hit key, up to `window` memories either side of it in time, in the same
        namespace and the same thread, at most `max_gap_s` away (`event_gap_s` for memories
        outside a conversation), within the request's filters.

        The thread is the indexer's `thread` column: the conversation (`metadata.session` /
        `session_id` / `conversation_id`) when the memory has one; otherwise the source's
        stream of events about one service (a watcher's events for one unit), or about one
        category when there is no service. Each lookup is a short walk of the (namespace,
        thread, ts, key) index, however busy the namespace.
        """
        if not keys or window <= 0:
            return {}
        # Rows the caller has already come back as their key alone (no transfer, no decoding).
        # Whether a row is known is tested once per row, in its walk: a test per column cost
        # an array search per column, and the planner a copy of the array per column.
        cols = ", ".join(f"CASE WHEN n.known THEN NULL ELSE n.{c[2:]} END AS {c[2:]}"
                         if c != "m.key" else "n.key" for c in COLUMNS_M.split(", "))
        filters = """AND ($4::timestamptz IS NULL OR m.ts >= $4)
                     AND ($5::text[] IS NULL OR m.category = ANY($5::text[]))"""
        # Each side is a walk of the (namespace, thread, ts, key) index from the hit outwards.
        sql = f"""
            WITH h AS (SELECT key, namespace, ts, thread,
                              CASE WHEN starts_with(thread, $7) THEN $3::float8
                                   ELSE $6::float8 END * interval '1 second' AS gap
                       FROM memories WHERE key = ANY($1::text[]) AND thread IS NOT NULL)
            SELECT h.key AS hit, {cols} FROM h CROSS JOIN LATERAL (
                (SELECT {COLUMNS_M}, m.key = ANY($8::text[]) AS known FROM memories m
                 WHERE m.namespace = h.namespace AND m.thread = h.thread
                   AND m.ts >= h.ts - h.gap AND (m.ts, m.key) < (h.ts, h.key) {filters}
                 ORDER BY m.ts DESC, m.key DESC LIMIT $2)
                UNION ALL
                (SELECT {COLUMNS_M}, m.key = ANY($8::text[]) AS known FROM memories m
                 WHERE m.namespace = h.namespace AND m.thread = h.thread
                   AND m.ts <= h.ts + h.gap AND (m.ts, m.key) > (h.ts, h.key) {filters}
                 ORDER BY m.ts, m.key LIMIT $2)) AS n"""
        rows = await self.generic_pool.fetch(
            sql, list(dict.fromkeys(keys)), window, float(max_gap_s), since, any_of(category),
            float(max_gap_s if event_gap_s is None else event_gap_s),
            _CONVERSATION_THREAD, list(known), timeout=self.timeout, record_class=MemoryRecord)
        out: dict[str, list[tuple[str, Row | None]]] = {}
        for r in rows:
            out.setdefault(r["hit"], []).append((r["key"], None if r["id"] is None else r))
        return out

    async def recent(self, namespace: str, since: datetime | None, category: str | None,
                     limit: int, categories: Sequence[str] | None = None) -> list[Memory]:
        return [r.memory() for r in await self.recent_rows(namespace, since, category, limit,
                                                           categories)]

    async def recent_rows(self, namespace: str, since: datetime | None, category: str | None,
                          limit: int, categories: Sequence[str] | None = None) -> list[Row]:
        if categories:
            # The newest of each category on its own (a walk of the (namespace, category, ts)
            # index that stops at `limit`), then merged: a `category = ANY(…)` filter reads every
            # row of those categories in the window and sorts them (7 ms at 2,000 memories,
            # growing with the namespace; run on every diagnostic question). One branch per
            # category, its name written into the statement: the planner weighs each category by
            # its own statistics. (Taken from an `unnest`, or passed as a value to a plan made
            # once, it could not: where the table held one category only, the plan walked the
            # whole window of the (namespace, ts) index for each category with no memories.)
            # Written in, the statement is planned once per set of categories (the system ones,
            # a family: a few) on `generic_pool`, not for every diagnostic question: its
            # planning took twice its execution (docs/perf/2026-11-30-recall-cpu-budget.md).
            cats = sorted({*categories} & {category} if category else {*categories})
            if not cats:
                return []
            sql = " UNION ALL ".join(
                f"""(SELECT {MEMORY_COLUMNS} FROM memories
                     WHERE namespace = $1 AND category = {_literal(c)}
                       AND ts >= COALESCE($2, '-infinity'::timestamptz)
                     ORDER BY ts DESC LIMIT $3)""" for c in cats)
            sql = f"SELECT * FROM ({sql}) AS m ORDER BY m.ts DESC LIMIT $3"
            return list(await self.generic_pool.fetch(sql, namespace, since, limit,
                                                      timeout=self.timeout,
                                                      record_class=MemoryRecord))
        sql = f"""SELECT {MEMORY_COLUMNS} FROM memories
                  WHERE namespace = $1 AND ($2::timestamptz IS NULL OR ts >= $2)
                    AND ($3::text IS NULL OR category = $3)
                  ORDER BY ts DESC LIMIT $4"""
        return list(await self.pool.fetch(sql, namespace, since, category, limit,
                                          timeout=self.timeout, record_class=MemoryRecord))

    async def newest_of_templates(self, namespace: str, templates: Sequence[str],
                                  since: datetime | None, until: datetime | None,
                                  category: CategoryFilter, per_template: int) -> list[Row]:
        """The newest `per_template` memories of each template (`template_hash` of the summary),
        within the filters: a walk of the (namespace, template, ts) index per template. Lines of
        one second tie on time: the greatest keys first, as `core/repeats.order_repeats` ranks
        them, not the table's order (which follows ingest, so a re-import answered otherwise)."""
        if not templates or per_template <= 0:
            return []
        try:
            rows = await self.generic_pool.fetch(
                f"""SELECT {COLUMNS_M} FROM unnest($2::text[]) AS t(template)
                    CROSS JOIN LATERAL (
                        SELECT {MEMORY_COLUMNS} FROM memories
                        WHERE namespace = $1 AND template = t.template
                          AND ts >= COALESCE($3::timestamptz, '-infinity')
                          AND ts <= COALESCE($4::timestamptz, 'infinity')
                          AND ($5::text[] IS NULL OR category = ANY($5::text[]))
                        ORDER BY ts DESC, key DESC LIMIT $6) AS m""",
                namespace, list(templates), since, until, any_of(category), per_template,
                timeout=self.timeout, record_class=MemoryRecord)
        except asyncpg.UndefinedColumnError:  # a store from before the indexer's migration 9
            return []
        return list(rows)

    async def session(self, namespace: str, session_id: str, limit: int) -> list[Memory]:
        """The memories of one conversation (its thread, the indexer's migration 4), oldest
        first: the session's turns, a walk of the (namespace, thread, ts) index."""
        rows = await self.pool.fetch(
            f"""SELECT {MEMORY_COLUMNS} FROM (
                    SELECT {MEMORY_COLUMNS} FROM memories WHERE namespace = $1 AND thread = $2
                    ORDER BY ts DESC LIMIT $3) AS s ORDER BY ts""",
            namespace, _CONVERSATION_THREAD + session_id, limit, timeout=self.timeout)
        return [memory_of(r) for r in rows]

    async def notable(self, namespace: str, since: datetime, limit: int) -> list[Memory]:
        """What a new session starts with (core/continuity.py): since `since`, the warnings and
        errors, diagnoses, changes to the machine, patterns, notes and session summaries."""
        rows = await self.pool.fetch(
            f"""SELECT {MEMORY_COLUMNS} FROM memories
                WHERE namespace = $1 AND ts >= $2
                  AND (severity IN ('warning', 'error', 'critical')
                       OR category = ANY($3::text[]) OR subcategory = ANY($4::text[]))
                ORDER BY ts DESC LIMIT $5""",
            namespace, since, sorted(NOTABLE_CATEGORIES), sorted(NOTABLE_SUBCATEGORIES), limit,
            timeout=self.timeout)
        return [memory_of(r) for r in rows]

    async def latest(self, namespace: str, category: str, subcategory: str) -> Memory | None:
        """The newest memory of a category and subcategory (e.g. the last session summary)."""
        row = await self.pool.fetchrow(
            f"""SELECT {MEMORY_COLUMNS} FROM memories
                WHERE namespace = $1 AND category = $2 AND subcategory = $3
                ORDER BY ts DESC LIMIT 1""", namespace, category, subcategory,
            timeout=self.timeout)
        return memory_of(row) if row is not None else None

    async def current_facts(self, namespace: str, limit: int) -> list[Memory]:
        """The newest memories with a subject that nothing superseded (patterns, stated
        preferences, facts): the indexer's partial index of subjects (migration 8)."""
        rows = await self.pool.fetch(
            f"""SELECT {MEMORY_COLUMNS} FROM memories
                WHERE namespace = $1 AND metadata ? 'subject' AND superseded_by IS NULL
                ORDER BY ts DESC LIMIT $2""", namespace, limit, timeout=self.timeout)
        return [memory_of(r) for r in rows]

    async def hosts(self, namespace: str, limit: int = 256) -> list[str]:
        """The hosts a namespace's memories happened on: a skip scan of the (namespace, host,
        ts) index (the indexer's migration 15), one short lookup per host."""
        try:
            rows = await self.pool.fetch(
                """WITH RECURSIVE h AS (
                       (SELECT host FROM memories WHERE namespace = $1 AND host IS NOT NULL
                        ORDER BY host LIMIT 1)
                       UNION ALL
                       SELECT (SELECT host FROM memories WHERE namespace = $1 AND host > h.host
                               ORDER BY host LIMIT 1) FROM h WHERE h.host IS NOT NULL)
                   SELECT host FROM h WHERE host IS NOT NULL LIMIT $2""",
                namespace, limit, timeout=self.timeout)
        except asyncpg.UndefinedColumnError:  # a store from before the indexer's migration 15
            return []
        return [r["host"] for r in rows]

    async def speakers(self, namespace: str, limit: int = 256) -> list[str]:
        """Who speaks in a namespace's conversations: a skip scan of the (namespace, category,
        actor) index (the indexer's migration 17), one short lookup per actor."""
        rows = await self.pool.fetch(
            """WITH RECURSIVE s AS (
                   (SELECT actor FROM memories WHERE namespace = $1 AND category = 'conversation'
                    ORDER BY actor LIMIT 1)
                   UNION ALL
                   SELECT (SELECT actor FROM memories
                           WHERE namespace = $1 AND category = 'conversation' AND actor > s.actor
                           ORDER BY actor LIMIT 1) FROM s WHERE s.actor IS NOT NULL)
               SELECT actor FROM s WHERE actor IS NOT NULL LIMIT $2""",
            namespace, limit, timeout=self.timeout)
        return [r["actor"] for r in rows]

    async def namespaces(self) -> list[str]:
        """Every namespace that holds memories: a skip scan of the (namespace, ts) index, one
        short lookup per namespace however many memories each holds."""
        rows = await self.pool.fetch(
            """WITH RECURSIVE ns AS (
                   (SELECT namespace FROM memories ORDER BY namespace LIMIT 1)
                   UNION ALL
                   SELECT (SELECT namespace FROM memories WHERE namespace > ns.namespace
                           ORDER BY namespace LIMIT 1) FROM ns WHERE ns.namespace IS NOT NULL)
               SELECT namespace FROM ns WHERE namespace IS NOT NULL""", timeout=self.timeout)
        return [r["namespace"] for r in rows]

    async def stats(self, namespace: str | None) -> dict[str, Any]:
        rows = await self.pool.fetch(
            """SELECT category, tier, count(*) AS n, min(ts) AS oldest, max(ts) AS newest
               FROM memories WHERE ($1::text IS NULL OR namespace = $1)
               GROUP BY category, tier""", namespace)
        by_category: dict[str, int] = {}
        by_tier: dict[str, int] = {}
        for r in rows:
            by_category[r["category"]] = by_category.get(r["category"], 0) + r["n"]
            by_tier[r["tier"]] = by_tier.get(r["tier"], 0) + r["n"]
        oldest = min((r["oldest"] for r in rows), default=None)
        newest = max((r["newest"] for r in rows), default=None)
        return {"total": sum(by_tier.values()), "by_category": by_category, "by_tier": by_tier,
                "oldest": oldest.isoformat() if oldest else None,
                "newest": newest.isoformat() if newest else None}

    async def ping(self) -> bool:
        return bool(await self.pool.fetchval("SELECT 1") == 1)

    async def export_rows(self, namespace: str, prefetch: int = 500
                          ) -> AsyncIterator[dict[str, Any]]:
        """Every memory of a namespace as an `ExportedMemory` JSON dict, in key order, through
        a server-side cursor (memory stays constant however many there are). One connection and
        one snapshot (repeatable read) for the whole export."""
        async with self.pool.acquire() as conn, conn.transaction(readonly=True,
                                                                   isolation="repeatable_read"):
            async for r in conn.cursor(_EXPORT_SQL, namespace, prefetch=prefetch):
                metadata = r["metadata"]
                yield {"id": r["id"], "timestamp": r["ts"].isoformat(),
                       "namespace": r["namespace"], "category": r["category"],
                       "subcategory": r["subcategory"], "actor": r["actor"],
                       "source": r["source"], "summary": r["summary"], "detail": r["detail"],
                       "metadata": json.loads(metadata) if isinstance(metadata, str)
                       else metadata or {},
                       "repeat_count": r["repeat_count"],
                       "last_seen": r["last_seen"].isoformat() if r["last_seen"] else None}
