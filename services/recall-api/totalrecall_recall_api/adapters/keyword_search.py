"""Keyword search over the indexer's `memories` mirror: IDF-weighted BM25 (binary term
frequency) over Postgres full-text search, each hit with its row (`PostgresStore` is built on
it; `postgres.py` holds the row and timeline look-ups)."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from ..core.term_weights import Counts, is_prefix
from ..ports import CategoryFilter, Row
from .records import COLUMNS_M, MemoryRecord
from .termstats import TermStats
from .tsquery import LEXEMES_SQL, WORD_LEXEMES_SQL, operand, quote

#: Query texts whose lexemes `PostgresStore` remembers.
LEXEME_CACHE_SIZE = 1024


def any_of(category: CategoryFilter) -> list[str] | None:
    """A category filter as the array its statements compare with `= ANY(…)`: one category, or
    several (a family, `core/categories.py`); None: every category. The same statement text
    serves both (one prepared statement, warmed up once: `adapters/warm.py`)."""
    if category is None:
        return None
    return [category] if isinstance(category, str) else list(category)


class KeywordSearch:
    """The keyword search of `PostgresStore` (which sets these in its constructor)."""

    pool: asyncpg.Pool
    term_stats: TermStats | None
    scan_cap: int
    timeout: float | None
    prefix_min_chars: int
    max_terms: int
    max_df_ratio: float
    _lexeme_cache: OrderedDict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]]

    async def bm25(self, terms: Sequence[str], namespace: str, since: datetime | None,
                   category: CategoryFilter, limit: int, hosts: Sequence[str] | None = None
                   ) -> list[tuple[str, float]]:
        return [(k, r) for k, r, _ in await self.bm25_rows(terms, namespace, since, category,
                                                           limit, hosts)]

    async def bm25_rows(self, terms: Sequence[str], namespace: str, since: datetime | None,
                        category: CategoryFilter, limit: int, hosts: Sequence[str] | None = None
                        ) -> list[tuple[str, float, Row]]:
        """`bm25` with each hit's row, so that fusion need not fetch it again. `hosts`: only
        memories of these hosts (the `host` column, the indexer's migration 15)."""
        weighted, common, counts = await self._weighted(terms, namespace)
        if not weighted:
            return []
        # OR semantics (an AND of every question word matches almost nothing), each matched term
        # scoring its IDF (BM25 with binary term frequency: memories are short), plus a little of
        # ts_rank for term frequency and the summary-over-detail weighting.
        phrases = await self._phrases(terms, counts)
        # The words too common to search by score but do not select: which memories are ranked
        # is decided by the telling words alone (`Counts.common`). A trade (eval/results/notes.md,
        # "the common words' score, a trade measured both ways"): scoring them wins LogQA's
        # "what did X fail to …" questions and costs LongMemEval two questions whose answer
        # lacks the common word ("using" a service; the gold turn says "on Spotify").
        scored = [*weighted, *common]
        n = len(scored) + len(phrases)
        # A word searched as a prefix scores its own IDF where the memory holds the word itself
        # and the prefix's (lower: more memories match it) where it holds only a longer word
        # ("postgres" names user postgres, not postgres1).
        exact = self._exact_weights(scored, counts)
        # The exact words and their weights come after every other argument, the hosts last.
        first = 6 + 2 * n
        exact_at = {i: first + 2 * j
                    for j, i in enumerate(i for i, w in enumerate(exact) if w is not None)}
        hosts_at = first + 2 * len(exact_at)
        # Matches of other hosts never take a place among the `cap` newest: filtered in each
        # walk (the text differs only when hosts are given, so an unfiltered search keeps its
        # index-only plan).
        by_host = f" AND host = ANY(${hosts_at}::text[])" if hosts else ""
        # Scoring touches every match, so a query made only of common words would scan much of
        # the table: rank at most `scan_cap` matches, the most recent ones. The rare terms' matches
        # are fetched on their own as well (a GIN lookup), so that the recent matches of common
        # words never crowd out the few memories that carry the query's most telling word.
        # The newest matches come from two indexes (the indexer's migration 5): the covering one
        # (key and tsv, no table reads) of the rows whose tsv fits in a btree entry, and one of
        # the long memories' rows, whose tsv is read from the table.
        where = """FROM memories WHERE tsv @@ {q} AND namespace = $2
                        AND ($3::timestamptz IS NULL OR ts >= $3)
                        AND ($4::text[] IS NULL OR category = ANY($4::text[])){fits}""" + by_host
        match = where + " ORDER BY ts DESC LIMIT {cap}"
        cap = int(self.scan_cap)
        quoted = [operand(lx, self.prefix_min_chars) for lx, _ in weighted]
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
            return (f"(SELECT key, tsv, ts FROM (SELECT key, tsv, ts {where.format(q=q, fits='')} "
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
                [f"(SELECT key, tsv, ts {match.format(q=any_word, cap=cap, fits=fits)})"
                 for fits in (" AND tsv_fits", " AND NOT tsv_fits")] + [looked_up(i) for i in rare])
        score = " + ".join(
            "(CASE " + (f"WHEN tsv @@ ${exact_at[i]}::tsquery THEN ${exact_at[i] + 1}::float8 "
                        if i in exact_at else "")
            + f"WHEN tsv @@ ${6 + i}::tsquery THEN ${6 + n + i}::float8 ELSE 0 END)"
            for i in range(n))
        # The ranked rows' columns come along (joined back by primary key for the `limit` winners
        # only), so fusion fetches rows for vector-only candidates alone. Of matches that score
        # alike (a unit's repeated failures), the newest take the `limit` places, not whichever
        # the grouping met first.
        sql = f"""
            WITH m AS ({branches}),
                 r AS (SELECT key, max({score} + 0.5 * ts_rank(tsv, to_tsquery('simple', $1)))
                              AS rank, max(ts) AS ts
                       FROM m GROUP BY key ORDER BY rank DESC, ts DESC, key LIMIT $5)
            SELECT r.rank, {COLUMNS_M} FROM r JOIN memories m USING (key)
            ORDER BY r.rank DESC, r.ts DESC, r.key"""
        args: list[Any] = [" | ".join(quoted), namespace, since, any_of(category), limit, *quoted,
                           *(operand(lx, self.prefix_min_chars) for lx, _ in common),
                           *(q for q, _ in phrases),
                           *(w for _, w in scored), *(w for _, w in phrases)]
        args += [v for i in exact_at for v in (quote(scored[i][0]), exact[i])]
        if hosts:
            args.append(list(hosts))
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
        return [(f"{quote(a)} <-> {quote(b)}", min(counts.idf(a), counts.idf(b)))
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
        text = " ".join(terms)
        if self.term_stats is not None and text not in self._lexeme_cache:
            # A new question: its parse and its words' counts in one round trip.
            with contextlib.suppress(asyncpg.UndefinedFunctionError):  # before migration 6
                rows = await self.term_stats.parse_counted(namespace, text, LEXEMES_SQL)
                if rows is not None:
                    self._keep_parse(text, rows)
        lexemes = await self._lexemes(text)
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
            rows = await self.pool.fetch(LEXEMES_SQL, text, timeout=self.timeout)
        except asyncpg.UndefinedFunctionError:  # a store from before the indexer's migration 6
            rows = await self.pool.fetch(WORD_LEXEMES_SQL, text, timeout=self.timeout)
        return self._keep_parse(text, rows)

    def _keep_parse(self, text: str, rows: Sequence[Any]
                    ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """The parse of `text` from its rows (lexeme, positions), remembered."""
        at = {pos: r["lexeme"] for r in rows for pos in (r["positions"] or ())}
        pairs = tuple(dict.fromkeys((at[p], at[p + 1]) for p in sorted(at)
                                    if p + 1 in at and at[p] != at[p + 1]))
        parsed = (tuple(dict.fromkeys(r["lexeme"] for r in rows)), pairs)
        self._lexeme_cache[text] = parsed
        if len(self._lexeme_cache) > LEXEME_CACHE_SIZE:
            self._lexeme_cache.popitem(last=False)
        return parsed

    async def keyword_statistics(self, namespace: str | None) -> dict[str, Any] | None:
        if self.term_stats is None:
            return None
        return await self.term_stats.describe(namespace)

    async def warm_terms(self, namespace: str) -> bool:
        """Load the namespace's term statistics (BM25 weights) before the first recall."""
        if self.term_stats is None:
            return False
        await self.term_stats.describe(namespace)
        return True
