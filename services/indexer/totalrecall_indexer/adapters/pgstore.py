"""The Postgres mirror: table `memories` (one row per key) with its full-text tsvector, and the
`forgotten` tombstones. The schema and its migrations are `pg_schema`."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
from totalrecall_schema.templates import template_hash
from totalrecall_worker.priority import lower_local_peer

from ..core.store_types import PgRow
from .pg_schema import migrate

log = logging.getLogger("totalrecall.indexer")

#: The newest memory of each (namespace, subject) among the given keys' subjects supersedes the
#: others of that subject, and is itself current: events need not arrive in order (an older fact
#: that arrives late is superseded at once; a rebuild replays in any order and ends the same).
_SUPERSEDE_BY_SUBJECT_SQL = """
WITH s AS (SELECT DISTINCT namespace, metadata->>'subject' AS subject FROM memories
           WHERE key = ANY($1::text[]) AND metadata ? 'subject'
             AND coalesce(metadata->>'subject', '') <> ''),
     newest AS (SELECT DISTINCT ON (m.namespace, s.subject) m.namespace, s.subject, m.key
                FROM s JOIN memories m ON m.namespace = s.namespace
                                      AND m.metadata ? 'subject'
                                      AND m.metadata->>'subject' = s.subject
                ORDER BY m.namespace, s.subject, m.ts DESC, m.key DESC)
UPDATE memories m SET superseded_by = NULLIF(n.key, m.key)
FROM newest n
WHERE m.namespace = n.namespace AND m.metadata ? 'subject' AND m.metadata->>'subject' = n.subject
  AND m.superseded_by IS DISTINCT FROM NULLIF(n.key, m.key)
"""

#: Memories named by a newer one's `metadata.supersedes` (ids, same namespace) are superseded by it.
_SUPERSEDE_NAMED_SQL = """
UPDATE memories m SET superseded_by = u.key
FROM memories u, jsonb_array_elements_text(
         CASE WHEN jsonb_typeof(u.metadata->'supersedes') = 'array'
              THEN u.metadata->'supersedes' ELSE '[]'::jsonb END) AS old(id)
WHERE u.key = ANY($1::text[]) AND m.namespace = u.namespace AND m.id = old.id
  AND m.key <> u.key AND m.superseded_by IS DISTINCT FROM u.key
"""

_COLUMNS = ("key", "id", "namespace", "ts", "category", "subcategory", "actor", "source",
            "severity", "service", "tags", "summary", "detail", "metadata", "tier", "embedded",
            "model", "repeat_count", "last_seen", "template", "part")

_UPSERT_SQL = f"""
INSERT INTO memories ({", ".join(_COLUMNS)})
SELECT u.key, u.id, u.namespace, u.ts, u.category, u.subcategory, u.actor, u.source, u.severity,
       u.service, u.tags::text[], u.summary, u.detail, u.metadata, u.tier, u.embedded, u.model,
       u.repeat_count, u.last_seen, u.template, u.part
FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[],
            $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
            $12::text[], $13::text[], $14::jsonb[], $15::text[], $16::bool[], $17::text[],
            $18::int[], $19::timestamptz[], $20::text[], $21::smallint[])
     AS u({", ".join(_COLUMNS)})
ON CONFLICT (key) DO UPDATE SET
    id = EXCLUDED.id, namespace = EXCLUDED.namespace, ts = EXCLUDED.ts,
    category = EXCLUDED.category, subcategory = EXCLUDED.subcategory, actor = EXCLUDED.actor,
    source = EXCLUDED.source, severity = EXCLUDED.severity, service = EXCLUDED.service,
    tags = EXCLUDED.tags, summary = EXCLUDED.summary, detail = EXCLUDED.detail,
    metadata = EXCLUDED.metadata, tier = EXCLUDED.tier,
    embedded = EXCLUDED.embedded
               OR (memories.embedded AND EXCLUDED.model IS NOT DISTINCT FROM memories.model),
    model = COALESCE(EXCLUDED.model, memories.model),
    repeat_count = GREATEST(memories.repeat_count, EXCLUDED.repeat_count),
    last_seen = GREATEST(memories.last_seen, EXCLUDED.last_seen),
    template = EXCLUDED.template, part = EXCLUDED.part
"""


def is_data_error(exc: BaseException) -> bool:
    """A Postgres error caused by the data itself: retrying won't help. SQLSTATE classes 22
    (data exception), 23 (integrity) and 54 (program limit exceeded: a value too big for an
    index entry or a tsvector). The batch is then retried event by event and only the event
    that fails on its own is dead-lettered, so one such event never stalls ingest."""
    state = getattr(exc, "sqlstate", None) or ""
    return isinstance(exc, asyncpg.PostgresError) and state[:2] in ("22", "23", "54")


def _columns(rows: Sequence[PgRow]) -> list[list[Any]]:
    cols: list[list[Any]] = [[] for _ in _COLUMNS]
    for row in rows:
        ev = row.rec.event
        md = ev.metadata
        values = (
            ev.key, ev.id, ev.namespace, ev.timestamp, ev.category, ev.subcategory, ev.actor,
            ev.source, md.severity.value, md.service, list(md.tags), ev.summary, ev.detail,
            json.dumps(md.model_dump(mode="json")), row.tier, row.embedded, row.rec.model,
            row.rec.repeat_count, row.rec.last_seen, template_hash(ev.summary), row.part,
        )
        for col, val in zip(cols, values, strict=True):
            col.append(val)
    # text[] of tags: unnest of a 2-D array is not what we want, so encode each as a literal.
    cols[10] = [_text_array_literal(t) for t in cols[10]]
    return cols


def _extra(row: PgRow, name: str) -> Any:
    """A metadata field beyond the schema's own (`subject`, `supersedes`), or None."""
    return (row.rec.event.metadata.model_extra or {}).get(name)


def _text_array_literal(items: list[str]) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "{" + ",".join(q(s) for s in items) + "}"


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset on release: nothing. asyncpg's default (`RESET ALL`, `UNLISTEN *`,
    `pg_advisory_unlock_all()`, `CLOSE ALL`) is one more round trip and statement after every
    use of a connection, for state the pool's users never set. An open transaction is still
    rolled back (asyncpg does that before calling this)."""


#: The tables the indexer vacuums and analyses itself (`PgStore.vacuum_if_grown`).
_MAINTAINED = "memories, term_stats, namespace_stats"


class PgStore:
    #: Did a write fail for its data (retrying won't help)? Asked by the core, which knows no
    #: asyncpg error.
    is_data_error = staticmethod(is_data_error)

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 4,
                 backend_nice: int = 0, partitions: tuple[int, ...] | None = None) -> None:
        self.dsn = dsn
        #: The index partitions this indexer owns (None: the whole table is its own). Every
        #: query over "all memories" (counts, re-index, consistency, retention, MEMORY.md,
        #: rebuild) sees only these: other partitions are other indexers'.
        self.partitions = partitions
        self._min = min_size
        self._max = max_size
        #: Nice value of the Postgres backends of the pool's connections, where the indexer may
        #: change it (`_lower_backend`); 0: left alone.
        self.backend_nice = backend_nice
        self.pool: asyncpg.Pool | None = None

    async def start(self) -> None:
        # Migrations hold an advisory lock: on a connection of their own, closed after, so that
        # the pool's connections never change their session's state (no lock, SET, LISTEN or
        # cursor) and need no reset when released.
        conn = await asyncpg.connect(self.dsn, command_timeout=60)
        try:
            await _say_if_not_utf8(conn)
            if await migrate(conn):
                # A migration may rewrite the table (a new stored column): that clears the
                # visibility map BM25's index-only scans rely on, and the planner's statistics.
                await conn.execute("VACUUM (ANALYZE) memories")
        finally:
            await conn.close()
        self.pool = await asyncpg.create_pool(self.dsn, min_size=self._min, max_size=self._max,
                                              command_timeout=60, reset=_keep_session,
                                              init=self._lower_backend)

    async def _lower_backend(self, conn: asyncpg.Connection) -> None:
        """Everything the indexer asks of Postgres is background work (ingest's writes, vacuum,
        statistics, re-index checks): on a busy CPU the backends answering recall's queries go
        first. Where Postgres runs on this machine as a user the indexer may renice (`make
        run`); a server elsewhere, or in a container, is left as it is."""
        if self.backend_nice > 0:
            await asyncio.to_thread(lower_local_peer, conn.get_server_pid(), self.backend_nice,
                                    "postgres")

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    def _own(self, n: int) -> str:
        """The condition "one of this indexer's partitions" as the query's parameter `$n`
        (`_owned()` its value); true for every row when the index is not partitioned."""
        if self.partitions is None:
            return f"(${n}::smallint[] IS NULL)"
        return f"part = ANY(${n}::smallint[])"

    def _owned(self) -> list[int] | None:
        return None if self.partitions is None else list(self.partitions)

    def _p(self) -> asyncpg.Pool:
        if self.pool is None:
            raise ConnectionError("postgres pool is not started")
        return self.pool

    async def ping(self) -> bool:
        try:
            async with self._p().acquire(timeout=2) as conn:
                await conn.fetchval("SELECT 1", timeout=2)
            return True
        except Exception:
            return False

    async def keys_older_than(self, cutoff: datetime, limit: int) -> list[str]:
        """The oldest memories before `cutoff` (retention), never the curated MEMORY.md ones."""
        rows = await self._p().fetch(
            "SELECT key FROM memories WHERE ts < $1 AND source <> 'MEMORY.md' "
            f"AND {self._own(3)} ORDER BY ts LIMIT $2", cutoff, limit, self._owned())
        return [r["key"] for r in rows]

    async def vacuum_if_grown(self, min_new_rows: int) -> int:
        """`VACUUM` the table once at least `min_new_rows` were inserted since the last vacuum
        (autovacuum's or ours), and `ANALYZE` it as well once a fifth of its rows changed since
        the last analyze; returns the inserts that triggered the vacuum (0: nothing done).

        The vacuum keeps the visibility map up with the newest rows: keyword search walks the
        newest matches of a namespace on an index-only scan, which reads the table for every
        row on a page not marked all-visible yet, so under a steady stream of events the rows
        it reads most are the ones autovacuum (a fifth of the table, once a minute at most)
        leaves unmarked longest. On a table that only grew, a vacuum reads the new pages only;
        statistics (a sample of the whole table) are the costly part and follow the table's
        growth. After bulk loads (rebuild, backfill, a burst) the fresh statistics keep the
        planner on the newest matches rather than a whole namespace. The word counts
        (`term_stats`, `namespace_stats`: rows updated at every insert) are vacuumed and
        analysed with it. The indexer owns these tables: autovacuum is only their backstop
        (migration 13), since its workers run at the server's priority, beside recall."""
        if min_new_rows <= 0:
            return 0
        async with self._p().acquire() as conn:
            row = await conn.fetchrow(
                "SELECT n_ins_since_vacuum AS grown, n_mod_since_analyze AS changed, "
                "n_live_tup AS live FROM pg_stat_user_tables WHERE relname = 'memories'")
            if row is None:
                return 0
            grown, changed = int(row["grown"] or 0), int(row["changed"] or 0)
            if grown < min_new_rows:
                return 0
            analyze = changed >= max(min_new_rows, 0.2 * (int(row["live"] or 0) - changed))
            # SKIP_LOCKED: an autovacuum of a table at work already does the job.
            await conn.execute(  # not in a transaction: allowed
                f"VACUUM (SKIP_LOCKED{', ANALYZE' if analyze else ''}) {_MAINTAINED}")
            return grown

    async def upsert(self, rows: Sequence[PgRow]) -> None:
        if not rows:
            return
        # One row per key per statement (ON CONFLICT cannot touch a row twice).
        dedup: dict[str, PgRow] = {}
        for row in rows:
            dedup[row.rec.key] = row
        cols = _columns(list(dedup.values()))
        async with self._p().acquire() as conn:
            await conn.execute(_UPSERT_SQL, *cols)
            await self._mark_superseded(conn, list(dedup.values()))

    @staticmethod
    async def _mark_superseded(conn: asyncpg.Connection, rows: Sequence[PgRow]) -> None:
        """Mark what the upserted rows supersede (see migration 8): by subject, by named ids.
        Most batches carry neither (machine events): then nothing is run."""
        subjects = [r.rec.key for r in rows if _extra(r, "subject")]
        named = [r.rec.key for r in rows if _extra(r, "supersedes")]
        if subjects:
            await conn.execute(_SUPERSEDE_BY_SUBJECT_SQL, subjects)
        if named:
            await conn.execute(_SUPERSEDE_NAMED_SQL, named)

    async def set_tier(self, keys: Sequence[str], tier: str) -> None:
        if keys:
            async with self._p().acquire() as conn:
                await conn.execute("UPDATE memories SET tier = $2 WHERE key = ANY($1::text[])",
                                   list(keys), tier)

    async def delete(self, keys: Sequence[str], namespace: str | None = None) -> list[str]:
        async with self._p().acquire() as conn:
            if namespace is None:
                rows = await conn.fetch(
                    "DELETE FROM memories WHERE key = ANY($1::text[]) RETURNING key", list(keys))
            else:
                rows = await conn.fetch(
                    "DELETE FROM memories WHERE key = ANY($1::text[]) AND namespace = $2 "
                    "RETURNING key", list(keys), namespace)
            deleted = [r["key"] for r in rows]
            if deleted:  # what they superseded is current again, unless another newer one is
                revived = await conn.fetch(
                    "UPDATE memories SET superseded_by = NULL "
                    "WHERE superseded_by = ANY($1::text[]) RETURNING key", deleted)
                if revived:
                    await conn.execute(_SUPERSEDE_BY_SUBJECT_SQL, [r["key"] for r in revived])
        return deleted

    async def namespaces_of(self, keys: Sequence[str]) -> dict[str, str]:
        """key -> namespace of the memories with these keys that are stored."""
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT key, namespace FROM memories WHERE key = ANY($1::text[])", list(keys))
        return {r["key"]: r["namespace"] for r in rows}

    async def add_tombstones(self, keys: Sequence[str], namespace: str | None) -> None:
        if keys:
            async with self._p().acquire() as conn:
                await conn.execute(
                    "INSERT INTO forgotten (key, namespace) SELECT k, $2 FROM unnest($1::text[]) k "
                    "ON CONFLICT (key) DO NOTHING", list(keys), namespace)

    async def tombstones(self) -> set[str]:
        """Every forgotten key (few: forgetting is rare; the indexer keeps them in memory)."""
        async with self._p().acquire() as conn:
            return {r["key"] for r in await conn.fetch("SELECT key FROM forgotten")}

    async def timestamps(self, keys: Sequence[str],
                         namespace: str | None = None) -> dict[str, datetime]:
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT key, ts FROM memories WHERE key = ANY($1::text[]) "
                "AND ($2::text IS NULL OR namespace = $2)", list(keys), namespace)
        return {r["key"]: r["ts"] for r in rows}

    async def count(self) -> int:
        async with self._p().acquire() as conn:
            return int(await conn.fetchval(
                f"SELECT count(*) FROM memories WHERE {self._own(1)}", self._owned()))

    async def counts_by_tier(self) -> dict[str, int]:
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT tier, embedded, count(*) AS n FROM memories "
                f"WHERE {self._own(1)} GROUP BY tier, embedded", self._owned())
        out: dict[str, int] = {}
        for r in rows:
            name = r["tier"] if r["embedded"] else f"{r['tier']}_unembedded"
            out[name] = out.get(name, 0) + int(r["n"])
        return out

    async def source_rows(self, source: str) -> dict[str, dict[str, Any]]:
        """key -> row (the fields MEMORY.md sync compares) of every memory from `source`."""
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT key, id, namespace, ts, category, subcategory, summary, detail, tags, "
                f"embedded, model, metadata FROM memories WHERE source = $1 AND {self._own(2)}",
                source, self._owned())
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            row = dict(r)
            if isinstance(row.get("metadata"), str):
                row["metadata"] = json.loads(row["metadata"])
            out[r["key"]] = row
        return out

    async def tier_page(self, tier: str, model: str | None, after_key: str,
                        limit: int) -> list[dict[str, Any]]:
        """Embedded memories of a tier (by the `tier` column), in key order after `after_key`:
        what a re-index of that tier needs."""
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT key, id, namespace, ts, category, subcategory, severity, summary, detail "
                "FROM memories WHERE tier = $1 AND embedded "
                f"AND model IS NOT DISTINCT FROM $2 AND key > $3 AND {self._own(5)} "
                "ORDER BY key LIMIT $4", tier, model, after_key, limit, self._owned())
        return [dict(r) for r in rows]

    async def vector_counts(self, model: str | None) -> dict[str, int]:
        """tier -> memories embedded with `model` (those Zvec should hold), by `tier`."""
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT tier, count(*) AS n FROM memories WHERE embedded "
                f"AND model IS NOT DISTINCT FROM $1 AND {self._own(2)} GROUP BY tier",
                model, self._owned())
        return {r["tier"]: int(r["n"]) for r in rows}

    async def key_tiers(self, model: str | None) -> dict[str, tuple[str, bool]]:
        """key -> (tier, whether it is embedded with `model`) of every memory."""
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT key, tier, (embedded AND model IS NOT DISTINCT FROM $1) AS vec "
                f"FROM memories WHERE {self._own(2)}", model, self._owned())
        return {r["key"]: (r["tier"], bool(r["vec"])) for r in rows}

    async def keys_in_tier(self, keys: Sequence[str], tier: str) -> set[str]:
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT key FROM memories WHERE key = ANY($1::text[]) AND tier = $2",
                list(keys), tier)
        return {r["key"] for r in rows}

    async def truncate(self) -> None:
        async with self._p().acquire() as conn:
            if self.partitions is None:
                await conn.execute("TRUNCATE memories")
            else:  # the other partitions are other indexers'
                await conn.execute(f"DELETE FROM memories WHERE {self._own(1)}", self._owned())


async def _say_if_not_utf8(conn: asyncpg.Connection) -> None:
    """A database created without an encoding (an initdb with no locale: SQL_ASCII) stores the
    text but cannot search it: every keyword search fails and recall runs on vectors alone.
    Said once at start, with the fix, rather than as a cryptic warning at every recall."""
    encoding = await conn.fetchval("SHOW server_encoding")
    if encoding != "UTF8":
        log.error("the database's encoding is %s, not UTF8: keyword search (BM25) fails on "
                  "it and recall runs on vectors alone. Create the database with ENCODING "
                  "'UTF8' (initdb --encoding=UTF8, or POSTGRES_INITDB_ARGS=--encoding=UTF8 for "
                  "the postgres image), then refill it from the Markdown logs (totalrecall "
                  "rebuild)", encoding)
