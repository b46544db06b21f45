"""Tokenising for BM25 queries and text similarity."""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
STOPWORDS = frozenset({
    "a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "by", "for",
    "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did",
    "have", "has", "had", "i", "you", "he", "she", "it", "we", "they", "me", "him", "her", "us",
    "them", "my", "your", "his", "its", "our", "their", "this", "that", "these", "those", "what",
    "which", "who", "whom", "whose", "when", "where", "why", "how", "there", "here", "not", "no",
    "so", "than", "then", "too", "very", "can", "could", "would", "should", "will", "shall",
    "may", "might", "must", "just", "about", "into", "over", "after", "before", "again", "also",
    "any", "all", "some", "such", "only", "own", "same", "other", "more", "most", "s", "t",
    "don", "now",
})


def words(text: str) -> list[str]:
    if text.isascii():  # lower-casing ASCII moves no word's edges: one pass, not one per word
        return _WORD.findall(text.lower())
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


#: A run of characters that may be an identifier (a block id, an IP:port, a path, user@host, a
#: version): kept whole among the terms, so that the store parses it as it parsed the memories
#: (the words alone would turn `blk_-42` into `blk` and `42`, `task 28.0` into `28` and `0`).
_RUN = re.compile(r"[\w.:/@+'’-]+")


def _identifier(run: str) -> str | None:
    tok = run.strip(".:/@+-'’")
    if len(tok) >= 3 and re.search(r"\d", tok) and re.search(r"[A-Za-z_.:/@-]", tok):
        return tok
    return None


def query_terms(text: str, limit: int = 32) -> list[str]:
    """The OR-terms of the BM25 query, in the query's order, deduplicated: its identifiers whole
    (not their pieces: the `10` and `250` of an IP would weigh as words never seen), and its
    content words. Numbers count, however short ("PacketResponder 2", "variable 4")."""
    seen: list[str] = []
    for run in _RUN.findall(text):
        ident = _identifier(run)
        for w in [ident] if ident else words(run):
            if ident is None:
                w = w.split("'")[0]
                if (len(w) < 2 and not w.isdigit()) or w in STOPWORDS:
                    continue
            if w not in seen:
                seen.append(w)
    return seen[:limit]


@lru_cache(maxsize=8192)
def shingles(text: str) -> frozenset[str]:
    """The content words of `text` (MMR compares memories by them). Remembered per text: the
    same memories are compared recall after recall."""
    return frozenset(words(text)) - STOPWORDS


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)
