"""Document frequencies of the full-text index, for IDF-weighted keyword search.

Postgres' `ts_rank` has no inverse document frequency: a question's common words ("what", "did",
"time") weigh as much as its rare ones, and an OR over every word matches most of the table,
which is slow. This keeps a periodically refreshed `lexeme → document count` table, per namespace
and overall, so keyword search can drop near-stopwords and weight the rest by IDF, like BM25.
Per namespace because each namespace is its own corpus (one machine's logs, one agent's
conversations): a word common elsewhere may be the telling one here, and one tenant's bulk load
must not reweigh another's searches.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
import time
from dataclasses import dataclass, field
from itertools import accumulate

import asyncpg

log = logging.getLogger("totalrecall.recall.termstats")


@dataclass
class TermStats:
    pool: asyncpg.Pool
    refresh_s: float = 300.0
    df: dict[str, int] = field(default_factory=dict)
    n_docs: int = 0
    ns_df: dict[str, dict[str, int]] = field(default_factory=dict)
    ns_docs: dict[str, int] = field(default_factory=dict)
    #: Namespaces smaller than this use the overall statistics (too few memories to say much).
    min_namespace_docs: int = 50
    refreshed_at: float = 0.0
    last_duration_s: float = 0.0
    #: Refresh early once the table grew by this share since the last refresh (a bulk ingest:
    #: its namespace would otherwise rank with the overall statistics for up to `refresh_s`).
    growth_ratio: float = 0.2
    #: How often growth is checked (one cheap statistics read).
    check_s: float = 5.0
    inserted_at_refresh: int = 0
    #: A namespace the last refresh did not see is read on its own when first searched, if it
    #: holds at most this many memories (a new agent, a conversation just loaded into a big
    #: store): otherwise its searches rank with the overall statistics until the next refresh.
    namespace_read_max_docs: int = 20_000
    #: ... at most once per this many seconds per namespace.
    namespace_retry_s: float = 30.0
    #: Words at least this long are searched as prefixes too (the store's `PREFIX_MIN_CHARS`):
    #: their document frequency is that of every lexeme they begin ("packet" is in no memory,
    #: but "packet:*" matches every "PacketResponder" line).
    prefix_min_chars: int = 4
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _ns_tried: dict[str, float] = field(default_factory=dict)
    #: Per corpus (a namespace's own, or None: the overall one), for the df map it was built
    #: from: the sorted lexemes and their cumulative counts. One entry per corpus: a refresh's
    #: new map replaces its entry, so the maps it replaced are freed.
    _prefix_index: dict[str | None, tuple[dict[str, int], list[str], list[int]]] = field(
        default_factory=dict)

    async def refresh(self) -> None:
        async with self._lock:
            t0 = time.perf_counter()
            inserted = await self.inserted()  # before reading: what arrives meanwhile counts
            try:
                sizes = await self.pool.fetch(
                    "SELECT namespace, count(*) AS n FROM memories GROUP BY namespace")
                rows = await self.pool.fetch(
                    """SELECT namespace, u.lexeme AS word, count(*) AS ndoc
                       FROM memories, unnest(tsv) AS u GROUP BY namespace, u.lexeme""")
            except asyncpg.UndefinedTableError:
                return  # the indexer has not created its schema yet
            ns_df: dict[str, dict[str, int]] = {}
            df: dict[str, int] = {}
            for r in rows:  # a memory is in one namespace: overall df = sum over namespaces
                ns_df.setdefault(r["namespace"], {})[r["word"]] = int(r["ndoc"])
                df[r["word"]] = df.get(r["word"], 0) + int(r["ndoc"])
            self.ns_df, self.df = ns_df, df
            self.ns_docs = {r["namespace"]: int(r["n"]) for r in sizes}
            self.n_docs = sum(self.ns_docs.values())
            self.refreshed_at = time.monotonic()
            self.inserted_at_refresh = inserted
            self.last_duration_s = time.perf_counter() - t0
            log.info("term stats: %d lexemes over %d memories in %.2fs", len(self.df),
                     self.n_docs, time.perf_counter() - t0)

    async def ensure(self, namespace: str | None) -> None:
        """Reads `namespace`'s statistics now if the last refresh did not know it (see
        `namespace_read_max_docs`), or all of them when there are none yet; the first search of
        a namespace loaded since then waits for it (milliseconds for a few thousand memories).
        None: only all of them when there are none yet."""
        if namespace is None:
            if not self.n_docs:
                await self._first_refresh()
            return
        if namespace in self.ns_docs:
            return
        now = time.monotonic()
        if now - self._ns_tried.get(namespace, -math.inf) < self.namespace_retry_s:
            return
        if len(self._ns_tried) > 10_000:  # bounded: a refresh makes most entries moot
            self._ns_tried.clear()
        self._ns_tried[namespace] = now
        if not self.n_docs:
            await self._first_refresh()
            return
        try:
            n = int(await self.pool.fetchval(
                "SELECT count(*) FROM memories WHERE namespace = $1", namespace) or 0)
            if n < self.min_namespace_docs or n > self.namespace_read_max_docs:
                return
            rows = await self.pool.fetch(
                """SELECT u.lexeme AS word, count(*) AS ndoc
                   FROM memories, unnest(tsv) AS u WHERE namespace = $1 GROUP BY u.lexeme""",
                namespace)
        except Exception as exc:  # the overall statistics serve meanwhile
            log.warning("term stats of namespace %r: %s", namespace, exc)
            return
        # Copies, not in place: `refresh` may be swapping the tables meanwhile.
        self.ns_df = {**self.ns_df, namespace: {r["word"]: int(r["ndoc"]) for r in rows}}
        self.ns_docs = {**self.ns_docs, namespace: n}

    async def _first_refresh(self) -> None:
        """No statistics yet (a new store, loaded since the refresher last looked): read them
        now when the store is small, rather than rank its first searches without any (every
        word equal, and a rare identifier lost behind the newest matches of a common word)."""
        try:
            total = int(await self.pool.fetchval("SELECT count(*) FROM memories") or 0)
        except Exception as exc:  # no table yet, or no database: searched without statistics
            log.warning("term stats: %s", exc)
            return
        if 0 < total <= self.namespace_read_max_docs:
            await self.refresh()

    def stale(self) -> bool:
        return time.monotonic() - self.refreshed_at > self.refresh_s

    async def inserted(self) -> int:
        """Rows ever inserted into the table (Postgres' cumulative statistics; 0 if unknown)."""
        try:
            n = await self.pool.fetchval(
                "SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'memories'")
        except Exception:
            return 0
        return int(n or 0)

    def grown(self, inserted: int) -> bool:
        new = inserted - self.inserted_at_refresh
        return new > 0 and new >= max(50, self.growth_ratio * self.n_docs)

    def settled(self, inserted: int, at_last_check: int) -> bool:
        """Rows arrived since the last refresh and none since the last check: a load (a log
        imported, a conversation stored) is done, and its words are counted now rather than
        up to `refresh_s` later (meanwhile its searches would weigh them by a part of it, so
        the same question would rank differently a minute later). Steady ingest never
        settles and so costs no more refreshes than before."""
        return inserted == at_last_check and inserted > self.inserted_at_refresh

    async def run(self) -> None:
        """Background refresher: every `refresh_s`, and early after a burst of inserts."""
        while True:
            try:
                await self.refresh()
            except Exception as exc:
                log.warning("term stats refresh failed: %s", exc)
            # Never spend more than ~5% of the database's time on statistics.
            floor = 20 * self.last_duration_s
            pause = max(self.refresh_s, floor) if self.n_docs else 5.0
            waited, at_last_check = 0.0, self.inserted_at_refresh
            while waited < pause:
                await asyncio.sleep(self.check_s)
                waited += self.check_s
                if waited < floor:
                    continue
                inserted = await self.inserted()
                if self.grown(inserted) or self.settled(inserted, at_last_check):
                    break
                at_last_check = inserted

    def corpus(self, namespace: str | None = None) -> tuple[dict[str, int], int]:
        """(lexeme → document count, number of documents) of `namespace`, or overall when the
        namespace is unknown (not refreshed yet) or too small to have telling statistics."""
        n_ns = self.ns_docs.get(namespace, 0) if namespace is not None else 0
        if n_ns >= self.min_namespace_docs and namespace in self.ns_df:
            return self.ns_df[namespace], n_ns
        return self.df, self.n_docs

    def describe(self, namespace: str | None = None) -> dict[str, object]:
        """What keyword search weighs `namespace`'s words by: its own counts or the overall
        ones, over how many memories, read how long ago (`/memory/stats`)."""
        df, n = self.corpus(namespace)
        return {"scope": "namespace" if df is not self.df else "all", "memories": n,
                "age_s": round(time.monotonic() - self.refreshed_at, 1)
                if self.refreshed_at else None}

    def is_prefix(self, lexeme: str) -> bool:
        """Whether the store searches `lexeme` as a prefix (see `adapters._operand`)."""
        return 0 < self.prefix_min_chars <= len(lexeme) and lexeme.isalnum()

    def doc_freq(self, lexeme: str, namespace: str | None = None) -> int:
        """Memories matching `lexeme` as it is searched: for a prefix, the sum over the
        lexemes it begins (an upper bound: a memory may hold several of them)."""
        df_map, _ = self.corpus(namespace)
        if not self.is_prefix(lexeme):
            return df_map.get(lexeme, 0)
        scope = None if df_map is self.df else namespace
        entry = self._prefix_index.get(scope)
        if entry is None or entry[0] is not df_map:
            keys = sorted(df_map)
            entry = (df_map, keys, [0, *accumulate(df_map[k] for k in keys)])
            self._prefix_index[scope] = entry
        _, keys, cums = entry
        lo = bisect.bisect_left(keys, lexeme)
        hi = bisect.bisect_left(keys, lexeme + "\U0010ffff")
        return cums[hi] - cums[lo]

    def idf(self, lexeme: str, namespace: str | None = None) -> float:
        _, n_docs = self.corpus(namespace)
        return _idf(self.doc_freq(lexeme, namespace), n_docs)

    def exact_idf(self, lexeme: str, namespace: str | None = None) -> float | None:
        """The IDF of `lexeme` itself, not of the words it begins (None: no memory holds it)."""
        df_map, n_docs = self.corpus(namespace)
        df = df_map.get(lexeme, 0)
        return _idf(df, n_docs) if df > 0 else None

    def select(self, lexemes: list[str], max_terms: int = 8, max_df_ratio: float = 0.2,
               min_docs_to_prune: int = 200,
               namespace: str | None = None) -> list[tuple[str, float]]:
        """The query's most informative lexemes with their IDF weights.

        Terms in more than `max_df_ratio` of all memories are dropped (unless nothing else is
        left) once there are `min_docs_to_prune` memories: below that, a document frequency says
        little (in 5 memories every word of the one relevant memory is "common") and scanning
        is cheap anyway. The rarest `max_terms` remain.
        """
        uniq = list(dict.fromkeys(lexemes))
        if not uniq:
            return []
        _, n_docs = self.corpus(namespace)
        n = max(n_docs, 1)
        df = {t: self.doc_freq(t, namespace) for t in uniq}
        informative = uniq
        if n >= min_docs_to_prune:
            informative = [t for t in uniq if df[t] / n <= max_df_ratio] or uniq
        informative.sort(key=lambda t: df[t])
        return [(t, self.idf(t, namespace)) for t in informative[:max_terms]]

    def common(self, lexemes: list[str], searched: list[tuple[str, float]], max_terms: int = 8,
               namespace: str | None = None) -> list[tuple[str, float]]:
        """The query's lexemes that `select` left out of the search, with their IDF weights.

        A word in a fifth of the memories is no way to find them, but among the memories the
        telling words found it still tells them apart: in "what did webmaster fail to provide",
        `fail` is what sets "Failed password for … webmaster" above "Invalid user webmaster"
        (BM25 scores every query term; only which memories are ranked depends on the rare ones).
        """
        taken = {t for t, _ in searched}
        left = [t for t in dict.fromkeys(lexemes) if t not in taken]
        return [(t, self.idf(t, namespace)) for t in left[:max_terms]
                if self.doc_freq(t, namespace) > 0]


def _idf(df: int, n_docs: int) -> float:
    """BM25's inverse document frequency of a word in `df` of `n_docs` memories."""
    n = max(n_docs, 1)
    df = min(df, n)
    return math.log(1 + (n - df + 0.5) / (df + 0.5))

