"""The `memories` table: the indexer's Postgres mirror of every memory, as its readers see it.

The indexer owns the table: it creates and migrates it (`totalrecall_indexer.adapters.pg_schema`,
versioned migrations) and is its only writer (ingest upserts by `key`; compaction, supersede,
forget, retention, rebuild). recall-api reads it (keyword search, rows by key, a hit's
neighbours, timelines, alerts, export), read-only. This module is the contract between the two:
every column a reader may use, with its Postgres type and who writes it. The table may hold
more than a reader needs, never less: `tests/integration/recall_api/test_memories_contract_it.py`
checks, on a real Postgres after every migration, that each column here exists with this type
and nullability, that each column of the table is here, and that every column recall-api's SQL
names is here.

Rules, as for every contract in this package: columns are added, never renamed or removed; a
reader names a column by its constant here (`MEMORY.key.name` …) or by a name listed here.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The table's name.
TABLE = "memories"


@dataclass(frozen=True)
class Column:
    """A column of `memories`: its name, its type as Postgres's `format_type` spells it, and
    whether it may be NULL."""

    name: str
    type: str
    nullable: bool = False

    def __str__(self) -> str:
        return self.name


class MemoriesTable:
    """The columns of `memories`, one attribute each (the docstring under each says its type,
    what it holds and who writes it)."""

    key = Column("key", "text")
    """text, primary key. The memory's storage key, `memory_key(namespace, id)` (events.py).
    Written by the indexer (every upsert: `ON CONFLICT (key)`)."""
    id = Column("id", "text")
    """text. The event's id as its producer gave it (unique within a namespace). Indexer."""
    namespace = Column("namespace", "text")
    """text. Whose memory it is; every reader's query is scoped by it. Indexer."""
    ts = Column("ts", "timestamp with time zone")
    """timestamptz. When the event happened (`MemoryEvent.timestamp`); timelines, recency and
    the daily log's day go by it. Indexer."""
    category = Column("category", "text")
    """text. The event's category (taxonomy.py). Indexer."""
    subcategory = Column("subcategory", "text")
    """text. Its subcategory (taxonomy.py). Indexer."""
    actor = Column("actor", "text")
    """text. Who acted: `user`, `system`, `agent`, a watcher's name. Indexer."""
    source = Column("source", "text")
    """text. What produced it: a watcher (`journal` …), `MEMORY.md`, `api`, an importer.
    Indexer."""
    severity = Column("severity", "text")
    """text. `metadata.severity` (taxonomy's `Severity`). Indexer."""
    service = Column("service", "text", nullable=True)
    """text, NULL when none. `metadata.service`: the systemd unit or service the event is about
    (recall's idle-unit alert and thread lookups). Indexer."""
    tags = Column("tags", "text[]")
    """text[]. `metadata.tags`. Indexer."""
    summary = Column("summary", "text")
    """text. One line, scrubbed of secrets: what recall shows and ranks first. Indexer."""
    detail = Column("detail", "text")
    """text ('' when none). The longer text, scrubbed. Indexer."""
    metadata = Column("metadata", "jsonb")
    """jsonb. The event's whole `EventMetadata` (host, machine_id, session, subject,
    confidence, custom fields …). Indexer (migration 15 filled in `host` of old rows)."""
    tier = Column("tier", "text")
    """text: `hot`, `warm` or `cold`. The Zvec tier holding the memory's vector (tiers.py).
    Indexer: ingest, compaction, the consistency check."""
    embedded = Column("embedded", "boolean")
    """boolean. Whether a vector of `model` is in Zvec (false: keyword search only until the
    embedder's backfill). Indexer."""
    model = Column("model", "text", nullable=True)
    """text, NULL when never embedded. The embedding model's id. Indexer."""
    repeat_count = Column("repeat_count", "integer")
    """integer (>= 1). How many times the same event was seen (templates.py). Indexer (an
    upsert keeps the greatest)."""
    last_seen = Column("last_seen", "timestamp with time zone", nullable=True)
    """timestamptz, NULL when seen once. When it was last seen again. Indexer."""
    inserted_at = Column("inserted_at", "timestamp with time zone")
    """timestamptz. When the row was first written (Postgres's `now()`, a default). Postgres."""
    tsv = Column("tsv", "tsvector", nullable=True)
    """tsvector. The full-text vector of summary (weight A), detail (B) and their identifiers
    (A, `tr_identifiers`), which the keyword search matches and ranks. Postgres: the
    `memories_tsv_fits` trigger (migration 11) fills it when the text changes."""
    tsv_fits = Column("tsv_fits", "boolean")
    """boolean. Whether `tsv` fits in the covering index `memories_ns_ts_tsv_fits` (false: the
    keyword search reads it from the table). Postgres: the same trigger."""
    thread = Column("thread", "text", nullable=True)
    """text, generated from metadata (migration 4). The memory's thread: `c␟<session>` for a
    conversation, `s␟<source>␟<service>`, else `k␟<source>␟<category>` (␟ is chr(31)); recall
    looks up a hit's neighbours by it. Postgres."""
    superseded_by = Column("superseded_by", "text", nullable=True)
    """text, NULL when current. The key of the memory that replaced this one (the newest of a
    `metadata.subject`, or one naming it in `metadata.supersedes`). Indexer (migration 8)."""
    template = Column("template", "text", nullable=True)
    """text, NULL for rows written before migration 9 until a rebuild. The summary's template
    hash (`templates.template_hash`), by which recall finds a line's newest repeats. Indexer."""
    host = Column("host", "text", nullable=True)
    """text, generated from `metadata.host` (migration 15), normalised (host.py). The host the
    event happened on; recall filters by it and lists a namespace's hosts. Postgres."""
    part = Column("part", "smallint", nullable=True)
    """smallint, NULL when the index is not partitioned. The index partition of the memory
    (partitions.py); an indexer's whole-table queries see only its own. Indexer
    (migration 16)."""


#: Every column, in table order.
COLUMNS: tuple[Column, ...] = tuple(
    v for v in vars(MemoriesTable).values() if isinstance(v, Column))
#: Their names.
COLUMN_NAMES: frozenset[str] = frozenset(c.name for c in COLUMNS)

#: The columns of a memory as recall-api selects it for an answer (its `MemoryRecord`).
MEMORY_ROW: tuple[Column, ...] = (
    MemoriesTable.key, MemoriesTable.id, MemoriesTable.namespace, MemoriesTable.ts,
    MemoriesTable.category, MemoriesTable.subcategory, MemoriesTable.actor,
    MemoriesTable.severity, MemoriesTable.tags, MemoriesTable.summary, MemoriesTable.detail,
    MemoriesTable.metadata, MemoriesTable.tier, MemoriesTable.superseded_by)


def select_list(columns: tuple[Column, ...], alias: str = "") -> str:
    """`a, b, c` (or `m.a, m.b, m.c` with `alias="m"`) for a SELECT."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + c.name for c in columns)
