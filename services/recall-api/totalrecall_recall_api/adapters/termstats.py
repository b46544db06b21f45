"""How many memories hold a question's words, read from the counts the indexer's triggers keep
(`term_stats` and `namespace_stats`, its migration 12), for IDF-weighted keyword search
(`core.term_weights`).

Per namespace, because each namespace is its own corpus (one machine's logs, one agent's
conversations): a word common elsewhere may be the telling one here, and one tenant's bulk load
must not reweigh another's searches. A namespace too small to say much is weighed by the counts
over every namespace.

The counts are exact at every commit and each search reads only its own words (an index probe
per word, a short range for a prefix), so nothing here grows with the store. What was read is
reused for `max_age_s`: a question asked again (an agent's recurring prompt) costs no read.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Sequence

import asyncpg

from ..core.term_weights import Counts, is_prefix

log = logging.getLogger("totalrecall.recall.termstats")

#: One probe per word of its corpus (`$1`: the namespace, or NULL for every namespace), and
#: for a word searched as a prefix the sum over the range of words it begins. `lexeme` sorts
#: as Python compares strings (COLLATE "C"): chr(1114111) is past every word it begins.
_WORDS_SQL = """
SELECT w.lexeme,
       (SELECT sum(t.ndoc) FROM term_stats t
        WHERE t.lexeme = w.lexeme COLLATE "C" AND {scope}) AS exact,
       CASE WHEN w.prefix THEN
           (SELECT sum(t.ndoc) FROM term_stats t
            WHERE t.lexeme >= w.lexeme COLLATE "C"
              AND t.lexeme < (w.lexeme || chr(1114111)) COLLATE "C" AND {scope}) END AS prefix
FROM unnest($2::text[], $3::bool[]) AS w(lexeme, prefix)
"""
_NAMESPACE_WORDS_SQL = _WORDS_SQL.format(scope="t.namespace = $1")
_ALL_WORDS_SQL = _WORDS_SQL.format(scope="$1::text IS NULL")
#: A question's lexemes (`{lexemes}`: the store's parse of `$1`, in order) with their counts in
#: one statement: a new question's keyword search then costs two round trips, not three. The
#: prefix counts of words too short to be searched as prefixes are not read (`is_prefix` decides
#: which of the rest count).
_PARSE_COUNT_SQL = """
WITH w AS MATERIALIZED (SELECT lexeme, positions, row_number() OVER () AS i
                        FROM ({lexemes}) AS l)
SELECT w.lexeme, w.positions,
       (SELECT sum(t.ndoc) FROM term_stats t
        WHERE t.lexeme = w.lexeme COLLATE "C" AND {scope}) AS exact,
       CASE WHEN length(w.lexeme) >= $3 THEN
           (SELECT sum(t.ndoc) FROM term_stats t
            WHERE t.lexeme >= w.lexeme COLLATE "C"
              AND t.lexeme < (w.lexeme || chr(1114111)) COLLATE "C" AND {scope}) END AS prefix
FROM w ORDER BY w.i
"""

_SIZES_SQL = """SELECT (SELECT ndoc FROM namespace_stats WHERE namespace = $1) AS n_ns,
                       (SELECT sum(ndoc) FROM namespace_stats) AS n_all"""


class TermStats:
    def __init__(self, pool: asyncpg.Pool, max_age_s: float = 10.0,
                 prefix_min_chars: int = 4, min_namespace_docs: int = 50,
                 max_cached_words: int = 50_000) -> None:
        self.pool = pool
        #: How long counts read are reused (0: read at every search).
        self.max_age_s = max_age_s
        #: Words at least this long are searched as prefixes too (the store's
        #: `PREFIX_MIN_CHARS`): their count is that of every word they begin.
        self.prefix_min_chars = prefix_min_chars
        #: Namespaces smaller than this are weighed by the counts over every namespace.
        self.min_namespace_docs = min_namespace_docs
        self.max_cached_words = max_cached_words
        #: namespace -> (read at, its memories, every namespace's)
        self._sizes: dict[str | None, tuple[float, int, int]] = {}
        #: (corpus: a namespace, None for all, word) -> (read at, exact, prefix or None)
        self._words: OrderedDict[tuple[str | None, str], tuple[float, int, int | None]] = \
            OrderedDict()
        self._missing_logged = False

    async def counts(self, namespace: str | None, lexemes: Sequence[str]) -> Counts | None:
        """The counts that weigh `lexemes` in `namespace`'s searches (every namespace's for
        None); None when the store keeps none (empty, or an indexer from before them)."""
        try:
            sizes = await self._sizes_of(namespace)
            if sizes is None:
                return None
            corpus, n_docs = sizes
            exact, prefix = await self._words_of(corpus, lexemes)
        except (asyncpg.UndefinedTableError, asyncpg.UndefinedColumnError):
            if not self._missing_logged:
                self._missing_logged = True
                log.warning("the store keeps no term counts (an indexer before its migration "
                            "12): keyword search weighs every word alike")
            return None
        return Counts(n_docs, exact, prefix, self.prefix_min_chars,
                      scope="all" if corpus is None else "namespace")

    async def parse_counted(self, namespace: str | None, text: str,
                            lexemes_sql: str) -> list[asyncpg.Record] | None:
        """The rows of `lexemes_sql` (lexeme, positions) for `text`, with the counts of those
        lexemes read in the same statement and kept as `counts` keeps them; None when the store
        keeps no counts (the caller parses on its own)."""
        try:
            sizes = await self._sizes_of(namespace)
            if sizes is None or self.prefix_min_chars <= 0:
                return None
            corpus = sizes[0]
            scope = "t.namespace = $2" if corpus is not None else "$2::text IS NULL"
            rows = await self.pool.fetch(
                _PARSE_COUNT_SQL.format(lexemes=lexemes_sql, scope=scope), text, corpus,
                self.prefix_min_chars)
        except (asyncpg.UndefinedTableError, asyncpg.UndefinedColumnError):
            return None
        now = time.monotonic()
        for r in rows:
            lx, p = r["lexeme"], r["prefix"]
            prefix = int(p) if p is not None and is_prefix(lx, self.prefix_min_chars) else None
            self._words[(corpus, lx)] = (now, int(r["exact"] or 0), prefix)
            self._words.move_to_end((corpus, lx))
        while len(self._words) > self.max_cached_words:
            self._words.popitem(last=False)
        return list(rows)

    async def describe(self, namespace: str | None) -> dict[str, object] | None:
        """What `namespace`'s next search weighs its words by (`/memory/stats`): its own counts
        or every namespace's, over how many memories (`age_s` 0: read for this call).

        Read now, and kept for the searches: a client that waits for a bulk load to be
        searchable (the evals, a test) polls this, and once it shows the whole load, the
        searches that follow weigh by it, not by sizes kept from a poll in the middle."""
        try:
            sizes = await self._sizes_of(namespace, fresh=True)
        except (asyncpg.UndefinedTableError, asyncpg.UndefinedColumnError):
            return None
        if sizes is None:
            return None
        corpus, n_docs = sizes
        return {"scope": "all" if corpus is None else "namespace", "memories": n_docs,
                "age_s": 0.0}

    async def _sizes_of(self, namespace: str | None, fresh: bool = False
                        ) -> tuple[str | None, int] | None:
        """(the corpus that weighs `namespace`'s words, its memories), None for an empty store.

        An empty store is not kept: it is the moment before a first load, and keeping it
        would weigh every word alike for `max_age_s` after memories arrived (the searches
        right after a bulk load ranked differently from the same searches seconds later)."""
        now = time.monotonic()
        cached = self._sizes.get(namespace)
        if fresh or cached is None or now - cached[0] > self.max_age_s:
            row = await self.pool.fetchrow(_SIZES_SQL, namespace)
            cached = (now, int(row["n_ns"] or 0), int(row["n_all"] or 0))
            if len(self._sizes) > 10_000:  # bounded: namespaces come and go
                self._sizes.clear()
            if cached[2]:
                self._sizes[namespace] = cached
            else:
                self._sizes.pop(namespace, None)
        _, n_ns, n_all = cached
        if not n_all:
            return None
        if namespace is not None and n_ns >= self.min_namespace_docs:
            return namespace, n_ns
        return None, n_all

    async def _words_of(self, corpus: str | None, lexemes: Sequence[str]
                        ) -> tuple[dict[str, int], dict[str, int]]:
        now = time.monotonic()
        exact: dict[str, int] = {}
        prefix: dict[str, int] = {}
        wanted: list[str] = []
        for lx in dict.fromkeys(lexemes):
            hit = self._words.get((corpus, lx))
            if hit is None or now - hit[0] > self.max_age_s:
                wanted.append(lx)
                continue
            self._words.move_to_end((corpus, lx))
            exact[lx] = hit[1]
            if hit[2] is not None:
                prefix[lx] = hit[2]
        if wanted:
            rows = await self.pool.fetch(
                _NAMESPACE_WORDS_SQL if corpus is not None else _ALL_WORDS_SQL, corpus, wanted,
                [is_prefix(lx, self.prefix_min_chars) for lx in wanted])
            for r in rows:
                lx, n, p = r["lexeme"], int(r["exact"] or 0), r["prefix"]
                exact[lx] = n
                if p is not None:
                    prefix[lx] = int(p)
                self._words[(corpus, lx)] = (now, n, None if p is None else int(p))
            while len(self._words) > self.max_cached_words:
                self._words.popitem(last=False)
        return exact, prefix
