"""Tokenising for BM25 queries and text similarity."""

from __future__ import annotations

import re

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
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def query_terms(text: str, limit: int = 32) -> list[str]:
    """Content words of a query, in order, deduplicated: the OR-terms of the BM25 query."""
    seen: list[str] = []
    for w in words(text):
        w = w.split("'")[0]
        if len(w) < 2 or w in STOPWORDS or w in seen:
            continue
        seen.append(w)
    return seen[:limit]


def tsquery_or(terms: list[str]) -> str:
    """A to_tsquery() expression matching any term (terms are [a-z0-9] only, so safe)."""
    return " | ".join(terms)


def shingles(text: str) -> frozenset[str]:
    ws = [w for w in words(text) if w not in STOPWORDS]
    return frozenset(ws)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)
