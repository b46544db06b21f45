"""Real adapters: NATS request-reply to the embedder and indexer, JetStream publish, Postgres."""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from operator import itemgetter
from typing import Any

import asyncpg
from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from totalrecall_schema import (
    AdminReply,
    AdminRequest,
    EmbedReply,
    EmbedRequest,
    Memory,
    MemoryEvent,
    Topology,
    VectorSearchReply,
    VectorSearchRequest,
)

from .core.continuity import NOTABLE_CATEGORIES, NOTABLE_SUBCATEGORIES
from .core.term_weights import Counts, is_prefix
from .ports import PublishFailed, Row
from .termstats import TermStats


class UpstreamError(RuntimeError):
    """The embedder or indexer answered with an error or not at all."""


class NatsEmbedder:
    def __init__(self, nc: NATS, topology: Topology, timeout: float) -> None:
        self.nc, self.topology, self.timeout = nc, topology, timeout

    async def embed_query(self, text: str, *, exclusive: bool = False
                          ) -> tuple[list[float], str | None]:
        req = EmbedRequest(texts=[text], kind="query", exclusive=exclusive)
        msg = await self.nc.request(self.topology.rpc_embed_query, req.model_dump_json().encode(),
                                    timeout=self.timeout)
        reply = EmbedReply.model_validate_json(msg.data)
        if reply.error or not reply.vectors:
            raise UpstreamError(reply.error or "embedder returned no vector")
        return reply.vectors[0], reply.model


class NatsVectorIndex:
    def __init__(self, nc: NATS, topology: Topology, timeout: float,
                 deep_timeout: float | None = None) -> None:
        self.nc, self.topology, self.timeout = nc, topology, timeout
        self.deep_timeout = max(timeout, deep_timeout or timeout)

    async def search(self, request: VectorSearchRequest) -> VectorSearchReply:
        """Hot-only searches get the short timeout; warm/cold ones the deep one."""
        timeout = self.timeout if set(request.tiers) <= {"hot"} else self.deep_timeout
        msg = await self.nc.request(self.topology.rpc_vector_search,
                                    request.model_dump_json().encode(), timeout=timeout)
        reply = VectorSearchReply.model_validate_json(msg.data)
        if reply.error:
            raise UpstreamError(reply.error)
        return reply

    async def admin(self, request: AdminRequest, timeout: float) -> AdminReply:
        msg = await self.nc.request(self.topology.rpc_index_admin,
                                    request.model_dump_json().encode(), timeout=timeout)
        return AdminReply.model_validate_json(msg.data)


class JetStreamPublisher:
    def __init__(self, nc: NATS, js: JetStreamContext, topology: Topology) -> None:
        self.nc, self.js, self.topology = nc, js, topology

    async def _one(self, event: MemoryEvent) -> bool:
        ack = await self.js.publish(
            self.topology.events_subject(event.category), event.model_dump_json().encode(),
            stream=self.topology.events_stream, headers={"Nats-Msg-Id": event.key})
        return bool(ack.duplicate)

    async def publish(self, events: Sequence[MemoryEvent]) -> list[bool]:
        out: list[bool] = []
        try:
            for i in range(0, len(events), 128):  # bounded concurrency, every PubAck awaited
                out += await asyncio.gather(*(self._one(e) for e in events[i : i + 128]))
        # A server whose store cannot write (a full disk) sends no PubAck at all: the client
        # only sees a timeout. Either way the caller must hear "not stored", not a bare 500.
        except (TimeoutError, NatsError) as exc:
            raise PublishFailed(f"{type(exc).__name__}: {exc}"[:200]) from exc
        return out

    async def ping(self) -> bool:
        return bool(self.nc.is_connected)

    async def lag(self) -> dict[str, int | None]:
        topo = self.topology
        stages = (("embedder", topo.events_stream, topo.embedder_durable),
                  ("indexer", topo.embedded_stream, topo.indexer_durable))

        async def pending(stream: str, durable: str) -> int | None:
            try:
                info = await self.js.consumer_info(stream, durable, timeout=1.0)
            except Exception:  # not created yet, or NATS away: unknown, not zero
                return None
            return (info.num_pending or 0) + (info.num_ack_pending or 0)

        found = await asyncio.gather(*(pending(stream, durable) for _, stream, durable in stages))
        return {name: n for (name, _, _), n in zip(stages, found, strict=True)}


_MEMORY_COLUMNS = ("key, id, namespace, ts, category, subcategory, actor, severity, tags, summary, "
                   "detail, metadata, tier, superseded_by")


_EXPORT_SQL = ("SELECT id, namespace, ts, category, subcategory, actor, source, summary, detail, "
               "metadata, repeat_count, last_seen FROM memories WHERE namespace = $1 "
               "ORDER BY key")

_COLUMNS_M = ", ".join(f"m.{c.strip()}" for c in _MEMORY_COLUMNS.split(","))

#: Query texts whose lexemes `PostgresStore` remembers.
LEXEME_CACHE_SIZE = 1024
#: Distinct metadata texts whose decoding `_memory` remembers.
METADATA_CACHE_SIZE = 8192


#: The indexer's `thread` column (its migration 4) starts with this for a conversation (chr(31)
#: separates its parts); other threads are a source's events about one service or category.
_CONVERSATION_THREAD = "c\x1f"


@lru_cache(maxsize=METADATA_CACHE_SIZE)
def _decoded(text: str) -> dict[str, Any]:
    return dict(json.loads(text) or {})


#: The fields `_memory` gives (`Memory.relative_time` keeps its default), as `model_construct`
#: would record them.
_GIVEN = frozenset(Memory.model_fields) - {"relative_time"}


def _tier(row: asyncpg.Record) -> str:
    tier = row["tier"]
    return tier if tier in ("hot", "warm", "cold") else "hot"  # type: ignore[no-any-return]


def _row_metadata(row: asyncpg.Record) -> Mapping[str, Any]:
    """A row's metadata, read only, with `superseded_by` when a newer memory replaced this one
    (the indexer's migration 8). Decoded once per distinct text and shared with every row of the
    same metadata: a memory's metadata rarely changes and the same rows come back recall after
    recall (neighbours, keyword hits); docs/perf/2026-11-27-recall-cpu.md."""
    value = row["metadata"]
    decoded = _decoded(value) if isinstance(value, str) else value or {}
    superseded_by = row.get("superseded_by")
    if superseded_by:
        return {**decoded, "superseded_by": superseded_by}
    return decoded  # type: ignore[no-any-return]


def _memory(row: asyncpg.Record, score: float = 0.0) -> Memory:
    # Not validated: the indexer validated every row it wrote, and a recall reads a hundred rows
    # or more (validating them was a tenth of its CPU time under load). Built as
    # `model_construct` builds it, without its walk of the model's fields for each row.
    return _constructed({
        "id": row["id"], "score": score, "timestamp": row["ts"], "category": row["category"],
        "subcategory": row["subcategory"], "summary": row["summary"], "detail": row["detail"],
        "tier": _tier(row), "namespace": row["namespace"], "actor": row["actor"],
        "severity": row["severity"], "tags": list(row["tags"] or []),
        "metadata": dict(_row_metadata(row)), "relative_time": ""})


def _constructed(fields: dict[str, Any]) -> Memory:
    """`Memory.model_construct(**fields)` for a dict of every field but `relative_time`'s
    default added, in the model's order."""
    m = Memory.__new__(Memory)
    object.__setattr__(m, "__dict__", fields)
    object.__setattr__(m, "__pydantic_fields_set__", set(_GIVEN))
    object.__setattr__(m, "__pydantic_extra__", None)
    object.__setattr__(m, "__pydantic_private__", None)
    return m


def _column(name: str) -> Any:
    """A read-only attribute that is a record's column."""
    return property(itemgetter(name))


class MemoryRecord(asyncpg.Record):
    """A `memories` row as ranking reads it (`ports.Row`): asyncpg's record itself, read by
    column name. Of the hundred rows or more a recall ranks it returns a few, and only those
    become a `Memory` (`memory()`): building one for every row was the largest part of the
    API's own Python code (docs/perf/2026-11-27-recall-api-rows.md)."""

    __slots__ = ()

    # Read through `operator.itemgetter` (no Python frame a read): ranking reads each many times.
    id: str = _column("id")
    namespace: str = _column("namespace")
    timestamp: datetime = _column("ts")
    category: str = _column("category")
    subcategory: str = _column("subcategory")
    summary: str = _column("summary")
    detail: str = _column("detail")
    actor: str = _column("actor")
    severity: str = _column("severity")

    tier: str = property(_tier)  # type: ignore[assignment]
    metadata: Mapping[str, Any] = property(_row_metadata)  # type: ignore[assignment]

    def memory(self) -> Memory:
        return _memory(self)


def _quote(lexeme: str) -> str:
    """A lexeme as a tsquery operand (quoted, so `&|!:*()` in it mean nothing)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


#: Query words at least this long also match as prefixes: the english parser keeps
#: `nginx.service`, `python3.11` or `docker-compose.yml` as single lexemes, so "why did nginx
#: fail" would otherwise never reach "nginx.service failed".
PREFIX_MIN_CHARS = 4


def _operand(lexeme: str, prefix_min_chars: int = PREFIX_MIN_CHARS) -> str:
    quoted = _quote(lexeme)
    return f"{quoted}:*" if is_prefix(lexeme, prefix_min_chars) else quoted


_WORD_LEXEMES_SQL = ("SELECT lexeme, positions FROM unnest(to_tsvector('english', $1)) "
                     "ORDER BY positions[1]")
#: The words as the english parser stores them, then the identifiers as the indexer's
#: `tr_identifiers` (its migration 6) adds them to every memory's tsv: one definition for both.
_LEXEMES_SQL = f"""SELECT lexeme, positions FROM ({_WORD_LEXEMES_SQL}) AS w
                   UNION ALL SELECT unnest(tr_identifiers($1)), NULL::smallint[]"""


#: The sessions of `PostgresStore.generic_pool`: each statement planned once, and its plan kept
#: until the table's statistics change. A plan made on a new store (a few rows, where reading
#: the whole table is cheapest) would stay a sequential scan as the table grows, so these
#: sessions never scan a table whole: their statements are index walks by design.
GENERIC_PLANS = {"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off"}


class PostgresStore:
    """Read-only access to the indexer's `memories` table."""

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
        #: the index (a category) stays with `pool`.
        self.generic_pool = pool if generic_pool is None else generic_pool
        self.max_terms, self.max_df_ratio = max_terms, max_df_ratio
        self.prefix_min_chars = prefix_min_chars  # 0: exact lexemes only
        self.term_stats = term_stats
        self.scan_cap = scan_cap
        self.timeout = timeout  # per statement; None = no limit
        self._lexeme_cache: OrderedDict[
            str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = OrderedDict()

    async def bm25(self, terms: Sequence[str], namespace: str, since: datetime | None,
                   category: str | None, limit: int) -> list[tuple[str, float]]:
        return [(k, r) for k, r, _ in await self.bm25_rows(terms, namespace, since, category, limit)]

    async def bm25_rows(self, terms: Sequence[str], namespace: str, since: datetime | None,
                        category: str | None, limit: int) -> list[tuple[str, float, Row]]:
        """`bm25` with each hit's row, so that fusion need not fetch it again."""
        weighted, common, counts = await self._weighted(terms, namespace)
        if not weighted:
            return []
        # OR semantics (an AND of every question word matches almost nothing), each matched term
        # scoring its IDF (BM25 with binary term frequency: memories are short), plus a little of
        # ts_rank for term frequency and the summary-over-detail weighting; the words too common
        # to search by do not score (eval/results/notes.md, 2026-11-25).
        phrases = await self._phrases(terms, counts)
        # The common words score but do not select: which memories are ranked is decided by
        # the telling words alone (`Counts.common`).
        scored = [*weighted, *common]
        n = len(scored) + len(phrases)
        # A word searched as a prefix scores its own IDF where the memory holds the word itself
        # and the prefix's (lower: more memories match it) where it holds only a longer word
        # ("postgres" names user postgres, not postgres1).
        exact = self._exact_weights(scored, counts)
        # Scoring touches every match, so a query made only of common words would scan much of
        # the table: rank at most `scan_cap` matches, the most recent ones. The rare terms' matches
        # are fetched on their own as well (a GIN lookup), so that the recent matches of common
        # words never crowd out the few memories that carry the query's most telling word.
        # The newest matches come from two indexes (the indexer's migration 5): the covering one
        # (key and tsv, no table reads) of the rows whose tsv fits in a btree entry, and one of
        # the long memories' rows, whose tsv is read from the table.
        where = """FROM memories WHERE tsv @@ {q} AND namespace = $2
                        AND ($3::timestamptz IS NULL OR ts >= $3)
                        AND ($4::text IS NULL OR category = $4){fits}"""
        match = where + " ORDER BY ts DESC LIMIT {cap}"
        cap = int(self.scan_cap)
        quoted = [_operand(lx, self.prefix_min_chars) for lx, _ in weighted]
        # Words that match few memories are looked up in the GIN index, newest first after.
        # Walking the time index for them reads every memory of the namespace before it gives up
        # on a word it cannot find (the planner cannot tell that a word is rare or absent: 126 ms
        # at 100k memories, a prompt about anything new; 0.2 ms this way). The inner LIMIT bounds
        # a prefix that matches far more than its lexeme's count ("system:*" and every
        # "systemd…"): those rank the first 2 × scan_cap matches found, not the newest. Each word
        # is looked up on its own, with its own bound: a word the statistics under-count (they
        # may not cover the namespace yet, and then every word looks rare) fills only its own
        # bound, never crowding out the few matches of the word that tells the memory apart.
        def looked_up(i: int) -> str:
            q = f"${6 + i}::tsquery"
            return (f"(SELECT key, tsv FROM (SELECT key, tsv, ts {where.format(q=q, fits='')} "
                    f"LIMIT {2 * cap}) AS g ORDER BY ts DESC LIMIT {cap})")

        matches = None if counts is None else {lx: counts.doc_freq(lx) for lx, _ in weighted}
        if matches is not None and sum(matches.values()) <= cap // 2:  # every word rare or absent
            branches = " UNION ALL ".join(looked_up(i) for i in range(len(weighted)))
        else:
            # The words whose matches could be crowded out of the `cap` most recent matches of
            # all while being few themselves; a word the statistics have not seen among them:
            # they were read before it arrived (a block id, an IP just logged), and a GIN lookup
            # of a word that is really absent costs next to nothing.
            rare = [] if matches is None else [
                i for i, (lx, _) in enumerate(weighted) if matches[lx] <= cap // 4]
            any_word = "to_tsquery('simple', $1)"
            branches = " UNION ALL ".join(
                [f"(SELECT key, tsv {match.format(q=any_word, cap=cap, fits=fits)})"
                 for fits in (" AND tsv_fits", " AND NOT tsv_fits")] + [looked_up(i) for i in rare])
        # The exact words and their weights come after every other argument.
        first = 6 + 2 * n
        exact_at = {i: first + 2 * j
                    for j, i in enumerate(i for i, w in enumerate(exact) if w is not None)}
        score = " + ".join(
            "(CASE " + (f"WHEN tsv @@ ${exact_at[i]}::tsquery THEN ${exact_at[i] + 1}::float8 "
                        if i in exact_at else "")
            + f"WHEN tsv @@ ${6 + i}::tsquery THEN ${6 + n + i}::float8 ELSE 0 END)"
            for i in range(n))
        # The ranked rows' columns come along (joined back by primary key for the `limit` winners
        # only), so fusion fetches rows for vector-only candidates alone.
        sql = f"""
            WITH m AS ({branches}),
                 r AS (SELECT key, max({score} + 0.5 * ts_rank(tsv, to_tsquery('simple', $1)))
                              AS rank
                       FROM m GROUP BY key ORDER BY rank DESC LIMIT $5)
            SELECT r.rank, {_COLUMNS_M} FROM r JOIN memories m USING (key)
            ORDER BY r.rank DESC"""
        args: list[Any] = [" | ".join(quoted), namespace, since, category, limit, *quoted,
                           *(_operand(lx, self.prefix_min_chars) for lx, _ in common),
                           *(q for q, _ in phrases),
                           *(w for _, w in scored), *(w for _, w in phrases)]
        args += [v for i in exact_at for v in (_quote(scored[i][0]), exact[i])]
        rows = await self.pool.fetch(sql, *args, timeout=self.timeout, record_class=MemoryRecord)
        # In units of the query's ideal match (every searched term matched): comparable across
        # queries, so fusion can tell a one-common-word match from a strong one.
        ideal = sum(max(w, exact[i] or 0.0) for i, (_, w) in enumerate(weighted)) or 1.0
        return [(r["key"], float(r["rank"]) / ideal, r) for r in rows]

    async def _phrases(self, terms: Sequence[str], counts: Counts | None
                       ) -> list[tuple[str, float]]:
        """Two query words that follow each other, as a phrase (`'task' <-> '28.0'`) scored at
        the smaller of their IDFs: "task 28.0" is the task, "stage 28.0" another line."""
        if counts is None:
            return []
        _, pairs = await self._parse(" ".join(terms))
        return [(f"{_quote(a)} <-> {_quote(b)}", min(counts.idf(a), counts.idf(b)))
                for a, b in pairs[: self.max_terms]]

    def _exact_weights(self, scored: list[tuple[str, float]], counts: Counts | None
                       ) -> list[float | None]:
        """Per scored word searched as a prefix that some memory holds as it is: the word's own
        IDF (None otherwise: the prefix's weight is all there is)."""
        out: list[float | None] = []
        for lx, w in scored:
            own = counts.exact_idf(lx) \
                if counts is not None and is_prefix(lx, self.prefix_min_chars) else None
            out.append(own if own is not None and own > w else None)
        return out

    async def _weighted(self, terms: Sequence[str], namespace: str
                        ) -> tuple[list[tuple[str, float]], list[tuple[str, float]],
                                   Counts | None]:
        """The query's lexemes that are searched, and the common ones that only score, with
        their IDF weights; and the counts they were weighed by (None: the store keeps none,
        every word weighs alike)."""
        if not terms:
            return [], [], None
        lexemes = await self._lexemes(" ".join(terms))
        counts = None if self.term_stats is None else \
            await self.term_stats.counts(namespace, lexemes)
        if counts is not None:
            searched = counts.select(lexemes, self.max_terms, self.max_df_ratio)
            return searched, counts.common(lexemes, searched, self.max_terms), counts
        return [(lx, 1.0) for lx in lexemes[: self.max_terms]], [], None

    async def _lexemes(self, text: str) -> list[str]:
        """The query's lexemes exactly as the index stores them (english stemming, stopwords)."""
        return list((await self._parse(text))[0])

    async def _parse(self, text: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """The query's lexemes, and the pairs of them that follow each other in it.

        Cached per text (the parse is deterministic): a repeated question, such as an agent's
        recurring prompt, skips the round trip."""
        cached = self._lexeme_cache.get(text)
        if cached is not None:
            self._lexeme_cache.move_to_end(text)
            return cached
        try:
            rows = await self.pool.fetch(_LEXEMES_SQL, text, timeout=self.timeout)
        except asyncpg.UndefinedFunctionError:  # a store from before the indexer's migration 6
            rows = await self.pool.fetch(_WORD_LEXEMES_SQL, text, timeout=self.timeout)
        at = {pos: r["lexeme"] for r in rows for pos in (r["positions"] or ())}
        pairs = tuple(dict.fromkeys((at[p], at[p + 1]) for p in sorted(at)
                                    if p + 1 in at and at[p] != at[p + 1]))
        parsed = (tuple(dict.fromkeys(r["lexeme"] for r in rows)), pairs)
        self._lexeme_cache[text] = parsed
        if len(self._lexeme_cache) > LEXEME_CACHE_SIZE:
            self._lexeme_cache.popitem(last=False)
        return parsed

    async def rows(self, keys: Sequence[str]) -> dict[str, Row]:
        if not keys:
            return {}
        rows = await self.generic_pool.fetch(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE key = ANY($1::text[])", list(keys),
            timeout=self.timeout, record_class=MemoryRecord)
        return {r["key"]: r for r in rows}

    async def neighbours(self, keys: Sequence[str], window: int, max_gap_s: float,
                         since: datetime | None = None, category: str | None = None,
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
                         if c != "m.key" else "n.key" for c in _COLUMNS_M.split(", "))
        filters = """AND ($4::timestamptz IS NULL OR m.ts >= $4)
                     AND ($5::text IS NULL OR m.category = $5)"""
        # Each side is a walk of the (namespace, thread, ts, key) index from the hit outwards.
        sql = f"""
            WITH h AS (SELECT key, namespace, ts, thread,
                              CASE WHEN starts_with(thread, $7) THEN $3::float8
                                   ELSE $6::float8 END * interval '1 second' AS gap
                       FROM memories WHERE key = ANY($1::text[]) AND thread IS NOT NULL)
            SELECT h.key AS hit, {cols} FROM h CROSS JOIN LATERAL (
                (SELECT {_COLUMNS_M}, m.key = ANY($8::text[]) AS known FROM memories m
                 WHERE m.namespace = h.namespace AND m.thread = h.thread
                   AND m.ts >= h.ts - h.gap AND (m.ts, m.key) < (h.ts, h.key) {filters}
                 ORDER BY m.ts DESC, m.key DESC LIMIT $2)
                UNION ALL
                (SELECT {_COLUMNS_M}, m.key = ANY($8::text[]) AS known FROM memories m
                 WHERE m.namespace = h.namespace AND m.thread = h.thread
                   AND m.ts <= h.ts + h.gap AND (m.ts, m.key) > (h.ts, h.key) {filters}
                 ORDER BY m.ts, m.key LIMIT $2)) AS n"""
        rows = await self.generic_pool.fetch(
            sql, list(dict.fromkeys(keys)), window, float(max_gap_s), since, category,
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
            # category, its name a parameter of its own: the planner then weighs each category
            # by its own statistics. A category taken from an `unnest` it could not see, and
            # where the table holds one category only it walked the whole window of the (namespace,
            # ts) index for each category that has no memories at all. (So it is planned for its
            # values: a plan made once cannot see the categories either.)
            cats = sorted({*categories} & {category} if category else {*categories})
            if not cats:
                return []
            sql = " UNION ALL ".join(
                f"""(SELECT {_MEMORY_COLUMNS} FROM memories
                     WHERE namespace = $1 AND category = ${4 + i}
                       AND ($2::timestamptz IS NULL OR ts >= $2)
                     ORDER BY ts DESC LIMIT $3)""" for i in range(len(cats)))
            sql = f"SELECT * FROM ({sql}) AS m ORDER BY m.ts DESC LIMIT $3"
            args: tuple[Any, ...] = (namespace, since, limit, *cats)
        else:
            sql = f"""SELECT {_MEMORY_COLUMNS} FROM memories
                      WHERE namespace = $1 AND ($2::timestamptz IS NULL OR ts >= $2)
                        AND ($3::text IS NULL OR category = $3)
                      ORDER BY ts DESC LIMIT $4"""
            args = (namespace, since, category, limit)
        return list(await self.pool.fetch(sql, *args, timeout=self.timeout,
                                          record_class=MemoryRecord))

    async def keyword_statistics(self, namespace: str | None) -> dict[str, Any] | None:
        if self.term_stats is None:
            return None
        return await self.term_stats.describe(namespace)

    async def newest_of_templates(self, namespace: str, templates: Sequence[str],
                                  since: datetime | None, until: datetime | None,
                                  category: str | None, per_template: int) -> list[Row]:
        """The newest `per_template` memories of each template (`template_hash` of the summary),
        within the filters: a walk of the (namespace, template, ts) index per template."""
        if not templates or per_template <= 0:
            return []
        try:
            rows = await self.generic_pool.fetch(
                f"""SELECT {_COLUMNS_M} FROM unnest($2::text[]) AS t(template)
                    CROSS JOIN LATERAL (
                        SELECT {_MEMORY_COLUMNS} FROM memories
                        WHERE namespace = $1 AND template = t.template
                          AND ts >= COALESCE($3::timestamptz, '-infinity')
                          AND ts <= COALESCE($4::timestamptz, 'infinity')
                          AND ($5::text IS NULL OR category = $5)
                        ORDER BY ts DESC LIMIT $6) AS m""",
                namespace, list(templates), since, until, category, per_template,
                timeout=self.timeout, record_class=MemoryRecord)
        except asyncpg.UndefinedColumnError:  # a store from before the indexer's migration 9
            return []
        return list(rows)

    async def session(self, namespace: str, session_id: str, limit: int) -> list[Memory]:
        """The memories of one conversation (its thread, the indexer's migration 4), oldest
        first: the session's turns, a walk of the (namespace, thread, ts) index."""
        rows = await self.pool.fetch(
            f"""SELECT {_MEMORY_COLUMNS} FROM (
                    SELECT {_MEMORY_COLUMNS} FROM memories WHERE namespace = $1 AND thread = $2
                    ORDER BY ts DESC LIMIT $3) AS s ORDER BY ts""",
            namespace, _CONVERSATION_THREAD + session_id, limit, timeout=self.timeout)
        return [_memory(r) for r in rows]

    async def notable(self, namespace: str, since: datetime, limit: int) -> list[Memory]:
        """What a new session starts with (core/continuity.py): since `since`, the warnings and
        errors, diagnoses, changes to the machine, patterns, notes and session summaries."""
        rows = await self.pool.fetch(
            f"""SELECT {_MEMORY_COLUMNS} FROM memories
                WHERE namespace = $1 AND ts >= $2
                  AND (severity IN ('warning', 'error', 'critical')
                       OR category = ANY($3::text[]) OR subcategory = ANY($4::text[]))
                ORDER BY ts DESC LIMIT $5""",
            namespace, since, sorted(NOTABLE_CATEGORIES), sorted(NOTABLE_SUBCATEGORIES), limit,
            timeout=self.timeout)
        return [_memory(r) for r in rows]

    async def latest(self, namespace: str, category: str, subcategory: str) -> Memory | None:
        """The newest memory of a category and subcategory (e.g. the last session summary)."""
        row = await self.pool.fetchrow(
            f"""SELECT {_MEMORY_COLUMNS} FROM memories
                WHERE namespace = $1 AND category = $2 AND subcategory = $3
                ORDER BY ts DESC LIMIT 1""", namespace, category, subcategory,
            timeout=self.timeout)
        return _memory(row) if row is not None else None

    async def warm_terms(self, namespace: str) -> bool:
        """Load the namespace's term statistics (BM25 weights) before the first recall."""
        if self.term_stats is None:
            return False
        await self.term_stats.describe(namespace)
        return True

    async def current_facts(self, namespace: str, limit: int) -> list[Memory]:
        """The newest memories with a subject that nothing superseded (patterns, stated
        preferences, facts): the indexer's partial index of subjects (migration 8)."""
        rows = await self.pool.fetch(
            f"""SELECT {_MEMORY_COLUMNS} FROM memories
                WHERE namespace = $1 AND metadata ? 'subject' AND superseded_by IS NULL
                ORDER BY ts DESC LIMIT $2""", namespace, limit, timeout=self.timeout)
        return [_memory(r) for r in rows]

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
