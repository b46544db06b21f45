"""The Postgres schema of the indexer's mirror, as versioned migrations applied at start."""

from __future__ import annotations

import asyncpg
from totalrecall_schema.host import HostInfo, local_host

#: The largest tsv (uncompressed bytes) kept in the BM25 covering index: a btree entry holds at
#: most 2704 bytes, and the entry also carries the namespace (<= 64), the key (32) and ts.
TSV_INDEX_MAX_BYTES = 2400

def _count_changes(name: str, event: str, delta: str, referencing: str,
                   may_lower: bool) -> str:
    """A statement-level trigger on `memories` that adds what one statement changed to the
    counts: `delta` defines `d` (namespace, lexeme, n) and `dn` (namespace, n) from the
    statement's transition tables."""
    lowered = """
    IF zns IS NOT NULL THEN
        DELETE FROM term_stats t USING unnest(zns, zlex) AS z(namespace, lexeme)
        WHERE t.namespace = z.namespace AND t.lexeme = z.lexeme AND t.ndoc <= 0;
    END IF;
    DELETE FROM namespace_stats WHERE ndoc <= 0;""" if may_lower else ""
    return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    zns text[];
    zlex text[];
BEGIN
    -- One statement, so the difference is worked out once; `up` (read below) is written
    -- before `upn` (read by nothing, run at the end), as in every statement.
    WITH {delta},
         up AS (INSERT INTO term_stats AS t (namespace, lexeme, ndoc)
                SELECT namespace, lexeme, n FROM d WHERE n <> 0 ORDER BY namespace, lexeme
                ON CONFLICT (namespace, lexeme) DO UPDATE SET ndoc = t.ndoc + EXCLUDED.ndoc
                RETURNING t.namespace, t.lexeme, t.ndoc),
         upn AS (INSERT INTO namespace_stats AS s (namespace, ndoc)
                 SELECT namespace, n FROM dn WHERE n <> 0 ORDER BY namespace
                 ON CONFLICT (namespace) DO UPDATE SET ndoc = s.ndoc + EXCLUDED.ndoc)
    SELECT array_agg(namespace), array_agg(lexeme) INTO zns, zlex FROM up WHERE ndoc <= 0;{lowered}
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS {name} ON memories;
CREATE TRIGGER {name} AFTER {event} ON memories REFERENCING {referencing}
    FOR EACH STATEMENT EXECUTE FUNCTION {name}();
"""


def _rows_delta(rows: str, sign: str) -> str:
    return f"""d AS (SELECT r.namespace, u.lexeme, {sign}count(*) AS n
                FROM {rows} r, unnest(r.tsv) AS u GROUP BY 1, 2),
         dn AS (SELECT namespace, {sign}count(*) AS n FROM {rows} GROUP BY 1)"""


#: An update counts only where a row's words or namespace changed (a repeat's new count, a tier,
#: `superseded_by` leave them): its old words out, its new ones in.
_UPDATED_DELTA = """ch AS (SELECT o.namespace AS ons, o.tsv AS otsv, n.namespace AS nns, n.tsv AS ntsv
                FROM old_rows o FULL JOIN new_rows n ON n.key = o.key
                WHERE o.key IS NULL OR n.key IS NULL OR o.namespace IS DISTINCT FROM n.namespace
                   OR o.tsv IS DISTINCT FROM n.tsv),
         d AS (SELECT namespace, lexeme, sum(n) AS n FROM (
                   SELECT ch.nns AS namespace, u.lexeme, 1 AS n FROM ch, unnest(ch.ntsv) AS u
                   WHERE ch.nns IS NOT NULL
                   UNION ALL
                   SELECT ch.ons, u.lexeme, -1 FROM ch, unnest(ch.otsv) AS u
                   WHERE ch.ons IS NOT NULL) AS x GROUP BY 1, 2),
         dn AS (SELECT namespace, sum(n) AS n FROM (
                   SELECT nns AS namespace, 1 AS n FROM ch WHERE nns IS NOT NULL
                   UNION ALL SELECT ons, -1 FROM ch WHERE ons IS NOT NULL) AS x GROUP BY 1)"""

_TERM_STATS = f"""
CREATE TABLE IF NOT EXISTS term_stats (
    namespace text NOT NULL,
    lexeme    text COLLATE "C" NOT NULL,
    ndoc      bigint NOT NULL,
    PRIMARY KEY (namespace, lexeme)
);
-- the overall counts, summed over namespaces (for a namespace too small to have its own)
CREATE INDEX IF NOT EXISTS term_stats_lexeme ON term_stats (lexeme);
CREATE TABLE IF NOT EXISTS namespace_stats (
    namespace text PRIMARY KEY,
    ndoc      bigint NOT NULL
);
{_count_changes("memories_count_inserted", "INSERT", _rows_delta("new_rows", ""),
                "NEW TABLE AS new_rows", may_lower=False)}
{_count_changes("memories_count_deleted", "DELETE", _rows_delta("old_rows", "-"),
                "OLD TABLE AS old_rows", may_lower=True)}
{_count_changes("memories_count_updated", "UPDATE", _UPDATED_DELTA,
                "OLD TABLE AS old_rows NEW TABLE AS new_rows", may_lower=True)}
CREATE OR REPLACE FUNCTION memories_count_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE term_stats, namespace_stats;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS memories_count_truncated ON memories;
CREATE TRIGGER memories_count_truncated AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memories_count_truncated();
-- What the store holds already; the triggers (their lock on the table held until this commits)
-- count everything after.
TRUNCATE term_stats, namespace_stats;
INSERT INTO term_stats (namespace, lexeme, ndoc)
SELECT namespace, u.lexeme, count(*) FROM memories, unnest(tsv) AS u GROUP BY 1, 2;
INSERT INTO namespace_stats (namespace, ndoc) SELECT namespace, count(*) FROM memories GROUP BY 1;
"""


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
    # A newer fact about the same subject ("the user now prefers neovim") supersedes the older
    # ones: `superseded_by` is the key of the memory that replaced a row (NULL: current). Set by
    # `_mark_superseded` after each upsert, from the events' own metadata (`subject`, and
    # `supersedes`: ids named explicitly), so a rebuild from the Markdown logs sets it again.
    # Only rows with a subject are in the index: they are few (patterns, preferences, facts).
    (8, "superseded memories: superseded_by, and the subjects' index", """
ALTER TABLE memories ADD COLUMN IF NOT EXISTS superseded_by text;
CREATE INDEX IF NOT EXISTS memories_ns_subject_ts ON memories (namespace, (metadata->>'subject'), ts)
    WHERE metadata ? 'subject';
"""),
    # The template of each memory's summary (`totalrecall_schema.templates.template_hash`: the
    # text but for numbers, ids and times), so recall can find the newest repeats of a line it
    # ranks first, not only the ones its searches happened to return. Rows written before stay
    # NULL until they are written again (a rebuild from the Markdown logs sets every one).
    (9, "template of each memory's summary, indexed for its newest repeats", """
ALTER TABLE memories ADD COLUMN IF NOT EXISTS template text;
CREATE INDEX IF NOT EXISTS memories_ns_template_ts ON memories (namespace, template, ts DESC)
    WHERE template IS NOT NULL;
"""),
    # recall-api's idle-unit alert reads each unit's newest state event: with this index that is
    # one probe per unit instead of sorting every service event the namespace ever had, on every
    # alert pass (docs/perf/2026-11-26-sustained-load.md).
    (10, "units' service events by time, for each unit's newest state", """
CREATE INDEX IF NOT EXISTS memories_ns_service_ts ON memories (namespace, service, ts DESC)
    WHERE category = 'system.service' AND service IS NOT NULL;
"""),
    # The tsv was computed twice per write: by the trigger (to size it for `tsv_fits`: generated
    # columns are computed after BEFORE triggers) and by the generated column. Now the trigger
    # alone fills it, once, with the same function, and an upsert that leaves the text as it was
    # (a redelivery, a repeat's new count) keeps the row's tsv instead of computing it again.
    # Existing rows keep their values (DROP EXPRESSION does not rewrite the table). So a later
    # change of `tr_tsv` must recompute the column with this trigger disabled: an UPDATE that
    # leaves the text as it was keeps the old tsv, whatever it sets.
    (11, "the tsv filled by the trigger alone, once per change of the text", f"""
ALTER TABLE memories ALTER COLUMN tsv DROP EXPRESSION IF EXISTS;
CREATE OR REPLACE FUNCTION memories_tsv_fits() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    t tsvector;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.summary IS NOT DISTINCT FROM OLD.summary
            AND NEW.detail IS NOT DISTINCT FROM OLD.detail THEN
        NEW.tsv := OLD.tsv;
        NEW.tsv_fits := OLD.tsv_fits;
        RETURN NEW;
    END IF;
    t := tr_tsv(NEW.summary, NEW.detail);
    NEW.tsv := t;
    NEW.tsv_fits := pg_column_size(t) <= {TSV_INDEX_MAX_BYTES};
    RETURN NEW;
END $$;
"""),
    # recall-api weighs a question's words by how many memories hold them (BM25's IDF). It read
    # them by aggregating every memory's words, again and again: seconds of a core at 100k
    # memories, growing with the store, while the recalls in flight waited. Now every change to
    # `memories` adds its own difference, in the statement that makes it: the counts are exact
    # at every commit, and cost what changed. `lexeme` sorts as Python compares strings (code
    # points), so a prefix's count is a range of it. Rows are taken in (namespace, lexeme) order
    # in every statement, so two writers never wait on each other in a cycle.
    (12, "term statistics kept by triggers: memories per namespace, and per lexeme", _TERM_STATS),
    # The indexer vacuums and analyses its tables itself, from backends at a lowered priority
    # (`PgStore.vacuum_if_grown`): the statistics of `memories` once a fifth of it changed,
    # the counts with them. Autovacuum's workers run at the server's priority, and its analyse
    # of `memories` (a tenth changed) came first, a core for seconds beside the recalls
    # (docs/perf/2026-11-27-autovacuum.md); the counts' rows change at every insert, so theirs
    # came every minute. Autovacuum stays the backstop, at twice the indexer's thresholds.
    (13, "the mirror's statistics kept by the indexer, autovacuum as the backstop", """
ALTER TABLE memories SET (autovacuum_analyze_scale_factor = 0.4);
ALTER TABLE term_stats SET (autovacuum_analyze_scale_factor = 0.4,
                            autovacuum_analyze_threshold = 1000000);
ALTER TABLE namespace_stats SET (autovacuum_analyze_threshold = 1000000);
"""),
    # No query filters on a memory's text, tags or metadata as a whole (words go through
    # `tsv`; metadata only through `->>` expressions, whose index keeps statistics of its own),
    # yet their statistics (the jsonb's above all: its sample is sorted) were the costliest
    # part of an `ANALYZE` of `memories`, which runs beside the recalls
    # (docs/perf/2026-11-27-analyze-cost.md).
    (14, "no planner statistics for columns no query filters on", """
ALTER TABLE memories ALTER COLUMN summary SET STATISTICS 0,
                     ALTER COLUMN detail SET STATISTICS 0,
                     ALTER COLUMN tags SET STATISTICS 0,
                     ALTER COLUMN metadata SET STATISTICS 0;
"""),
    # Several machines may feed one memory: each event names the host it happened on
    # (`metadata.host`, `machine_id`: `totalrecall_schema.host`), and recall filters by it.
    # The column is generated from the metadata, so that every writer fills it (an indexer of
    # an older release too, whose watchers already named the host), normalised as `host_name`
    # normalises it (the name of a structured `host` a client stored before). A row written
    # without a host is the local host's (the host the migrating indexer runs on, given to
    # `migrate`), as a rebuild from the Markdown reads an old record (`MemoryEvent` fills in the
    # same): its metadata is completed first, then the column added. A row naming the local
    # host gets its machine id. The index serves recall's filter (namespace and host, newest
    # first) and the hosts a namespace knows (a skip scan).
    (15, "the host each memory happened on, indexed for recall's filter", """
WITH here AS (SELECT coalesce(nullif(current_setting('totalrecall.local_host', true), ''),
                              'localhost') AS host,
                     nullif(current_setting('totalrecall.machine_id', true), '') AS mid)
UPDATE memories m SET metadata = m.metadata
        || CASE WHEN coalesce(btrim(m.metadata->>'host'), '') <> '' THEN '{}'::jsonb
                ELSE jsonb_build_object('host', here.host) END
        || CASE WHEN here.mid IS NULL OR coalesce(m.metadata->>'machine_id', '') <> ''
                THEN '{}'::jsonb ELSE jsonb_build_object('machine_id', here.mid) END
FROM here
WHERE coalesce(btrim(m.metadata->>'host'), '') = ''  -- no host, a JSON null or a blank one
   OR (coalesce(m.metadata->>'machine_id', '') = '' AND here.mid IS NOT NULL
       AND jsonb_typeof(m.metadata->'host') = 'string'
       AND rtrim(lower(btrim(m.metadata->>'host')), '.') = here.host);
ALTER TABLE memories ADD COLUMN IF NOT EXISTS host text GENERATED ALWAYS AS (
    nullif(rtrim(lower(btrim(CASE jsonb_typeof(metadata->'host')
        WHEN 'string' THEN metadata->>'host'
        WHEN 'object' THEN coalesce(metadata->'host'->>'name', metadata->'host'->>'hostname')
        END)), '.'), '')) STORED;
CREATE INDEX IF NOT EXISTS memories_ns_host_ts ON memories (namespace, host, ts);
"""),
    # An index split into partitions (`totalrecall_schema.partitions`) has one indexer per
    # partition writing this one table: each memory names its partition, and an indexer's
    # queries over all memories (counts, consistency, re-index, retention, rebuild) see only
    # its own. NULL: the index is not partitioned. No index: those queries read the table
    # whole anyway, and ingest pays nothing for it.
    (16, "the index partition each memory belongs to", """
ALTER TABLE memories ADD COLUMN IF NOT EXISTS part smallint;
"""),
    # Recall embeds a question without the names of the people a namespace's conversations
    # are between (they are matched by the actor field): it reads those names by a skip scan
    # of this index, one short lookup per name, however many turns each said.
    (17, "the actors of each category, for the speakers a question names", """
CREATE INDEX IF NOT EXISTS memories_ns_cat_actor ON memories (namespace, category, actor);
"""),
    # Keyword search looks each word up in the GIN index, and every lookup also reads the
    # index's pending list end to end: the rows inserted since it was last merged into the
    # index, by a vacuum (the indexer's, every `VACUUM_MIN_NEW_ROWS` inserts) or once the list
    # outgrows `gin_pending_list_limit` (4 MB by default). A load that ends short of the next
    # vacuum leaves its last rows there for good: 869 long conversation turns, and a recall's
    # keyword search took ~63 ms instead of ~15 (docs/perf/2026-11-30-keyword-pending-list.md).
    # Bounded at the minimum, 64 kB, the inserting indexer merges it as it goes (an insert of
    # ~1,000 such turns 1.0 -> 1.6 s: the merge a vacuum would have done later).
    (18, "the keyword index's pending list kept small", """
ALTER INDEX memories_tsv_gin SET (gin_pending_list_limit = 64);
"""),
]

_ADVISORY_LOCK_ID = 0x7452_4D45  # "tRME"


async def migrate(conn: asyncpg.Connection, host: HostInfo | None = None) -> list[int]:
    """Apply pending migrations; returns the versions applied now. `host`: the host rows
    written before hosts were kept happened on (default: this machine, `local_host()`)."""
    here = host or local_host()
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
                # What migration 15 reads as the local host (set for this transaction only).
                await conn.execute(
                    "SELECT set_config('totalrecall.local_host', $1, true), "
                    "set_config('totalrecall.machine_id', $2, true)",
                    here.hostname, here.machine_id or "")
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, description) VALUES ($1, $2)",
                    version, description)
            applied_now.append(version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _ADVISORY_LOCK_ID)
    return applied_now
