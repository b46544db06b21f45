"""The Postgres mirror: table `memories` (one row per key), full-text tsvector, migrations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from .markdown import LogRecord

#: The largest tsv (uncompressed bytes) kept in the BM25 covering index: a btree entry holds at
#: most 2704 bytes, and the entry also carries the namespace (<= 64), the key (32) and ts.
TSV_INDEX_MAX_BYTES = 2400

#: Versioned migrations, applied in order under an advisory lock (safe for concurrent starts).
MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "memories table, full-text and filter indexes", """
CREATE TABLE IF NOT EXISTS memories (
    key          text PRIMARY KEY,
    id           text NOT NULL,
    namespace    text NOT NULL,
    ts           timestamptz NOT NULL,
    category     text NOT NULL,
    subcategory  text NOT NULL,
    actor        text NOT NULL,
    source       text NOT NULL,
    severity     text NOT NULL,
    service      text,
    tags         text[] NOT NULL DEFAULT '{}',
    summary      text NOT NULL,
    detail       text NOT NULL DEFAULT '',
    metadata     jsonb NOT NULL DEFAULT '{}'::jsonb,
    tier         text NOT NULL DEFAULT 'hot',
    embedded     boolean NOT NULL DEFAULT false,
    model        text,
    repeat_count integer NOT NULL DEFAULT 1,
    last_seen    timestamptz,
    inserted_at  timestamptz NOT NULL DEFAULT now(),
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(summary, '')), 'A') ||
        setweight(to_tsvector('english', coalesce(detail, '')), 'B')) STORED
);
CREATE INDEX IF NOT EXISTS memories_tsv_gin ON memories USING GIN (tsv);
CREATE INDEX IF NOT EXISTS memories_ns_ts ON memories (namespace, ts);
CREATE INDEX IF NOT EXISTS memories_ns_cat_ts ON memories (namespace, category, ts);
"""),
    (2, "index of the rows that come from MEMORY.md", """
CREATE INDEX IF NOT EXISTS memories_source_memory_md ON memories (key) WHERE source = 'MEMORY.md';
"""),
    # Superseded by 5: its covering index took every row's tsv, and a long memory's tsv (over
    # ~2.7 kB) cannot go into a btree entry, so the insert failed and stalled ingest. Databases
    # that already ran it have the index dropped by 5; new ones never build it.
    (3, "covering index for BM25 candidates by namespace and time", "SELECT 1;"),
    # recall-api's neighbour expansion looks up the memories next to a hit in its thread: the
    # conversation (metadata session / session_id / conversation_id), else the source's stream
    # of events about one service, else about one category. As a column with its own index each
    # lookup is a short index walk instead of a filter over every memory in the time window
    # (200 interleaved sessions in 20k turns: 24 ms -> 2.3 ms per lookup of 20 hits).
    (4, "thread of each memory, indexed for neighbour lookups", """
ALTER TABLE memories ADD COLUMN IF NOT EXISTS thread text GENERATED ALWAYS AS (
    CASE WHEN coalesce(metadata->>'session', metadata->>'session_id',
                       metadata->>'conversation_id') IS NOT NULL
         THEN 'c' || chr(31) || coalesce(metadata->>'session', metadata->>'session_id',
                                         metadata->>'conversation_id')
         WHEN metadata->>'service' IS NOT NULL
         THEN 's' || chr(31) || source || chr(31) || (metadata->>'service')
         ELSE 'k' || chr(31) || source || chr(31) || category END) STORED;
CREATE INDEX IF NOT EXISTS memories_ns_thread_ts ON memories (namespace, thread, ts, key);
"""),
    # recall-api's BM25 walks a namespace's newest matches: with key and tsv in the index it is
    # answered by an index-only scan instead of ~4.5k random heap reads (14 ms -> 2.7 ms at 100k).
    # A btree entry holds at most ~2.7 kB, and a long memory's tsv is bigger: those rows
    # (`tsv_fits` false, set by a trigger for every writer) have an index of their own, without
    # the tsv, and BM25 reads their tsv from the table.
    (5, "BM25 covering index for the rows whose tsv fits in it, a plain one for the others", f"""
ALTER TABLE memories ADD COLUMN IF NOT EXISTS tsv_fits boolean NOT NULL DEFAULT true;
CREATE OR REPLACE FUNCTION memories_tsv_fits() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the generated tsv is computed after BEFORE triggers: the same expression, here
    NEW.tsv_fits := pg_column_size(
        setweight(to_tsvector('english', coalesce(NEW.summary, '')), 'A') ||
        setweight(to_tsvector('english', coalesce(NEW.detail, '')), 'B')) <= {TSV_INDEX_MAX_BYTES};
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS memories_tsv_fits ON memories;
CREATE TRIGGER memories_tsv_fits BEFORE INSERT OR UPDATE OF summary, detail ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_tsv_fits();
UPDATE memories SET tsv_fits = false
    WHERE pg_column_size(tsv || ''::tsvector) > {TSV_INDEX_MAX_BYTES};
DROP INDEX IF EXISTS memories_ns_ts_tsv;
CREATE INDEX IF NOT EXISTS memories_ns_ts_tsv_fits ON memories (namespace, ts) INCLUDE (key, tsv)
    WHERE tsv_fits;
CREATE INDEX IF NOT EXISTS memories_ns_ts_tsv_big ON memories (namespace, ts) WHERE NOT tsv_fits;
"""),
    # Operators ask by identifiers: a block id, an IP with its port, a user, a path. The english
    # parser splits `rdd_42_18` into three numbers, keeps `/10.250.7.146` with its slash (so
    # `10.250.7.146` never matches) and a path or `user@host` only whole. `tr_identifiers` is
    # the one definition of an identifier (recall-api parses questions with it too): a token
    # with a digit and a letter or one of `_ . : / @ -`, or a path or address with letters,
    # edges trimmed, kept whole and also split at `/ : @ = ,`. Its lexemes join the tsv verbatim
    # (weight A); `tr_tsv` is the tsv of a memory, for the generated column and the trigger.
    (6, "identifiers as whole tokens and parts in the full-text vector", f"""
CREATE OR REPLACE FUNCTION tr_identifiers(doc text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
WITH tok AS (
    SELECT DISTINCT lower(btrim(m[1], '.:/@+-')) AS t
    FROM regexp_matches(doc, '([[:alnum:]_.:/@+-]+)', 'g') AS m),
whole AS (
    SELECT t FROM tok
    WHERE length(t) >= 3
      AND ((t ~ '[0-9]' AND t ~ '[[:alpha:]_.:/@-]') OR (t ~ '[/@]' AND t ~ '[[:alpha:]]')))
SELECT coalesce(array_agg(DISTINCT x), '{{}}'::text[]) FROM (
    SELECT t AS x FROM whole
    UNION ALL
    SELECT btrim(p, '.-') FROM whole, regexp_split_to_table(t, '[/:@=,]+') AS p
    WHERE t ~ '[/:@=,]') AS s
WHERE length(x) >= 2
$fn$;
CREATE OR REPLACE FUNCTION tr_tsv(summary text, detail text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
SELECT setweight(to_tsvector('english', coalesce(summary, '')), 'A')
    || setweight(to_tsvector('english', coalesce(detail, '')), 'B')
    || setweight(array_to_tsvector(
           tr_identifiers(coalesce(summary, '') || ' ' || coalesce(detail, ''))), 'A')
$fn$;
DROP INDEX IF EXISTS memories_tsv_gin;
DROP INDEX IF EXISTS memories_ns_ts_tsv_fits;
ALTER TABLE memories DROP COLUMN tsv;
ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS (tr_tsv(summary, detail)) STORED;
CREATE OR REPLACE FUNCTION memories_tsv_fits() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the generated tsv is computed after BEFORE triggers: the same expression, here
    NEW.tsv_fits := pg_column_size(tr_tsv(NEW.summary, NEW.detail)) <= {TSV_INDEX_MAX_BYTES};
    RETURN NEW;
END $$;
UPDATE memories SET tsv_fits = NOT tsv_fits
    WHERE tsv_fits <> (pg_column_size(tsv || ''::tsvector) <= {TSV_INDEX_MAX_BYTES});
CREATE INDEX memories_tsv_gin ON memories USING GIN (tsv);
CREATE INDEX memories_ns_ts_tsv_fits ON memories (namespace, ts) INCLUDE (key, tsv)
    WHERE tsv_fits;
"""),
    # A forgotten memory must stay forgotten: its event may still be in the JetStream streams
    # (redelivered, replayed to a re-created consumer) or in the embedder's backfill journal,
    # and a MEMORY.md entry comes back at every sync. The indexer drops every write of a key
    # listed here. Not touched by a rebuild (which truncates `memories` only).
    (7, "tombstones of forgotten memories", """
CREATE TABLE IF NOT EXISTS forgotten (
    key        text PRIMARY KEY,
    namespace  text,
    at         timestamptz NOT NULL DEFAULT now()
);
"""),
]

_ADVISORY_LOCK_ID = 0x7452_4D45  # "tRME"

_COLUMNS = ("key", "id", "namespace", "ts", "category", "subcategory", "actor", "source",
            "severity", "service", "tags", "summary", "detail", "metadata", "tier", "embedded",
            "model", "repeat_count", "last_seen")

_UPSERT_SQL = f"""
INSERT INTO memories ({", ".join(_COLUMNS)})
SELECT u.key, u.id, u.namespace, u.ts, u.category, u.subcategory, u.actor, u.source, u.severity,
       u.service, u.tags::text[], u.summary, u.detail, u.metadata, u.tier, u.embedded, u.model,
       u.repeat_count, u.last_seen
FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[],
            $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
            $12::text[], $13::text[], $14::jsonb[], $15::text[], $16::bool[], $17::text[],
            $18::int[], $19::timestamptz[])
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
    last_seen = GREATEST(memories.last_seen, EXCLUDED.last_seen)
"""


@dataclass
class PgRow:
    rec: LogRecord
    tier: str
    embedded: bool


async def migrate(conn: asyncpg.Connection) -> list[int]:
    """Apply pending migrations; returns the versions applied now."""
    applied_now: list[int] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _ADVISORY_LOCK_ID)
    try:
        await conn.execute("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY, description text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now())""")
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, description, sql in MIGRATIONS:
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, description) VALUES ($1, $2)",
                    version, description)
            applied_now.append(version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _ADVISORY_LOCK_ID)
    return applied_now


def _columns(rows: Sequence[PgRow]) -> list[list[Any]]:
    cols: list[list[Any]] = [[] for _ in _COLUMNS]
    for row in rows:
        ev = row.rec.event
        md = ev.metadata
        values = (
            ev.key, ev.id, ev.namespace, ev.timestamp, ev.category, ev.subcategory, ev.actor,
            ev.source, md.severity.value, md.service, list(md.tags), ev.summary, ev.detail,
            json.dumps(md.model_dump(mode="json")), row.tier, row.embedded, row.rec.model,
            row.rec.repeat_count, row.rec.last_seen,
        )
        for col, val in zip(cols, values, strict=True):
            col.append(val)
    # text[] of tags: unnest of a 2-D array is not what we want, so encode each as a literal.
    cols[10] = [_text_array_literal(t) for t in cols[10]]
    return cols


def _text_array_literal(items: list[str]) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return "{" + ",".join(q(s) for s in items) + "}"


class PgStore:
    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 4) -> None:
        self.dsn = dsn
        self._min = min_size
        self._max = max_size
        self.pool: asyncpg.Pool | None = None

    async def start(self) -> None:
        self.pool = await asyncpg.create_pool(self.dsn, min_size=self._min, max_size=self._max,
                                              command_timeout=60)
        async with self.pool.acquire() as conn:
            if await migrate(conn):
                # A migration may rewrite the table (a new stored column): that clears the
                # visibility map BM25's index-only scans rely on, and the planner's statistics.
                await conn.execute("VACUUM (ANALYZE) memories")

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

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
            "SELECT key FROM memories WHERE ts < $1 AND source <> 'MEMORY.md' ORDER BY ts LIMIT $2",
            cutoff, limit)
        return [r["key"] for r in rows]

    async def vacuum_if_grown(self, min_new_rows: int) -> int:
        """`VACUUM (ANALYZE)` the table once at least `min_new_rows`, and a fifth of its rows,
        were inserted since the last vacuum (autovacuum's or ours); returns the rows that
        triggered it (0: nothing done). After bulk loads (rebuild, backfill, a burst) this keeps
        BM25 on index-only scans (the visibility map) and the planner's statistics fresh
        (without them Postgres scans a whole namespace instead of its newest matches), without
        waiting for autovacuum's nap. The indexer owns the table: nothing else maintains it."""
        if min_new_rows <= 0:
            return 0
        async with self._p().acquire() as conn:
            row = await conn.fetchrow(
                "SELECT n_ins_since_vacuum AS grown, n_live_tup AS live FROM pg_stat_user_tables "
                "WHERE relname = 'memories'")
            grown = int(row["grown"] or 0) if row else 0
            if not grown or grown < max(min_new_rows, 0.2 * (int(row["live"] or 0) - grown)):
                return 0
            await conn.execute("VACUUM (ANALYZE) memories")  # not in a transaction: allowed
            return int(grown)

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
        return [r["key"] for r in rows]

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
            return int(await conn.fetchval("SELECT count(*) FROM memories"))

    async def counts_by_tier(self) -> dict[str, int]:
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT tier, embedded, count(*) AS n FROM memories GROUP BY tier, embedded")
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
                "embedded, model, metadata FROM memories WHERE source = $1", source)
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
                "AND model IS NOT DISTINCT FROM $2 AND key > $3 ORDER BY key LIMIT $4",
                tier, model, after_key, limit)
        return [dict(r) for r in rows]

    async def keys_in_tier(self, keys: Sequence[str], tier: str) -> set[str]:
        async with self._p().acquire() as conn:
            rows = await conn.fetch(
                "SELECT key FROM memories WHERE key = ANY($1::text[]) AND tier = $2",
                list(keys), tier)
        return {r["key"] for r in rows}

    async def truncate(self) -> None:
        async with self._p().acquire() as conn:
            await conn.execute("TRUNCATE memories")
