"""Plain BM25 over the same texts we ingest: the reference a keyword index must at least match.

bm25s (Lucene's BM25, k1 1.5, b 0.75) with English stop words and Snowball stemming, the same
baseline as the benchmark data README's LoCoMo row; one index per corpus (per namespace).
"""

from __future__ import annotations

from collections.abc import Sequence

NAME = "BM25 (bm25s, English stop words + Snowball)"


def bm25_rankings(ids: Sequence[str], texts: Sequence[str], queries: Sequence[str],
                  k: int = 10) -> list[list[str]]:
    """For each query, the ids of its k best texts, best first (texts that share no word with
    the query are left out)."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index(bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer,
                                   show_progress=False), show_progress=False)
    k = min(k, len(texts))
    out: list[list[str]] = []
    for q in queries:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        docs, scores = retriever.retrieve(tokens, k=k, show_progress=False)
        out.append([ids[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0])
    return out
