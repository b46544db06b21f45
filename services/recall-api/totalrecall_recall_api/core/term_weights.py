"""Which of a question's words keyword search looks for, and what each weighs (BM25's IDF).

Postgres' `ts_rank` has no inverse document frequency: a question's common words ("what", "did",
"time") weigh as much as its rare ones, and an OR over every word matches most of the table,
which is slow. Given how many memories hold each word (`Counts`, read by `termstats`), keyword
search drops near-stopwords and weighs the rest by IDF, like BM25.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


def is_prefix(lexeme: str, prefix_min_chars: int) -> bool:
    """Whether the store searches `lexeme` as a prefix too (`adapters.tsquery.operand`): "packet" is
    in no memory, but "packet:*" matches every "PacketResponder" line."""
    return 0 < prefix_min_chars <= len(lexeme) and lexeme.isalnum()


def idf(df: int, n_docs: int) -> float:
    """BM25's inverse document frequency of a word in `df` of `n_docs` memories."""
    n = max(n_docs, 1)
    df = min(df, n)
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True)
class Counts:
    """Of one corpus (a namespace's memories, or all of them: `scope`), how many memories it
    holds and, for a question's words, how many hold each: as it is (`exact`) and, for a word
    searched as a prefix, summed over the words it begins (`prefix`: an upper bound, a memory
    may hold several of them). A word missing from both is in no memory."""

    n_docs: int
    exact: Mapping[str, int]
    prefix: Mapping[str, int]
    prefix_min_chars: int = 4
    scope: str = "namespace"

    def doc_freq(self, lexeme: str) -> int:
        """Memories matching `lexeme` as it is searched."""
        if is_prefix(lexeme, self.prefix_min_chars):
            return self.prefix.get(lexeme, 0)
        return self.exact.get(lexeme, 0)

    def idf(self, lexeme: str) -> float:
        return idf(self.doc_freq(lexeme), self.n_docs)

    def exact_idf(self, lexeme: str) -> float | None:
        """The IDF of `lexeme` itself, not of the words it begins (None: no memory holds it)."""
        df = self.exact.get(lexeme, 0)
        return idf(df, self.n_docs) if df > 0 else None

    def select(self, lexemes: list[str], max_terms: int = 8, max_df_ratio: float = 0.2,
               min_docs_to_prune: int = 200) -> list[tuple[str, float]]:
        """The question's most informative lexemes with their IDF weights.

        Terms in more than `max_df_ratio` of all memories are dropped (unless nothing else is
        left) once there are `min_docs_to_prune` memories: below that, a document frequency says
        little (in 5 memories every word of the one relevant memory is "common") and scanning
        is cheap anyway. The rarest `max_terms` remain.
        """
        uniq = list(dict.fromkeys(lexemes))
        if not uniq:
            return []
        n = max(self.n_docs, 1)
        df = {t: self.doc_freq(t) for t in uniq}
        informative = uniq
        if n >= min_docs_to_prune:
            informative = [t for t in uniq if df[t] / n <= max_df_ratio] or uniq
        informative.sort(key=lambda t: df[t])
        return [(t, self.idf(t)) for t in informative[:max_terms]]

    def common(self, lexemes: list[str], searched: list[tuple[str, float]],
               max_terms: int = 8) -> list[tuple[str, float]]:
        """The question's lexemes that `select` left out of the search, with their IDF weights.

        A word in a fifth of the memories is no way to find them, but among the memories the
        telling words found it still tells them apart: in "what did webmaster fail to provide",
        `fail` is what sets "Failed password for … webmaster" above "Invalid user webmaster"
        (BM25 scores every query term; only which memories are ranked depends on the rare ones).
        """
        taken = {t for t, _ in searched}
        left = [t for t in dict.fromkeys(lexemes) if t not in taken]
        return [(t, self.idf(t)) for t in left[:max_terms] if self.doc_freq(t) > 0]
