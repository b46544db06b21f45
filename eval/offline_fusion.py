"""The offline ablations' fusion variants (`eval.offline`): how one question's signals (BM25,
cosine, neighbours, session, speaker) become one score per turn."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# ------------------------------------------------------------------------------------------------
# Fusion

def minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def zscore(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def ranks(x: np.ndarray) -> np.ndarray:
    """1-based rank of each element (highest score = 1)."""
    order = np.argsort(-x, kind="stable")
    r = np.empty(len(x), dtype=np.float64)
    r[order] = np.arange(1, len(x) + 1)
    return r


def topn_mask(x: np.ndarray, n: int | None) -> np.ndarray:
    if n is None or n >= len(x):
        return np.ones(len(x), dtype=bool)
    m = np.zeros(len(x), dtype=bool)
    m[np.argsort(-x, kind="stable")[:n]] = True
    return m


@dataclass
class Signals:
    """Everything a fusion function may use for one question."""
    bm25: np.ndarray
    cos: np.ndarray | None
    prev: np.ndarray           # index of the previous turn in the same session, -1 if none
    next: np.ndarray
    session: np.ndarray        # session index per doc
    actor_hit: np.ndarray      # 1.0 where the doc's speaker is named in the question
    extra: dict[str, np.ndarray] = field(default_factory=dict)


Fusion = Callable[[Signals], np.ndarray]


def f_bm25(s: Signals) -> np.ndarray:
    return s.bm25


def f_dense(s: Signals) -> np.ndarray:
    assert s.cos is not None
    return s.cos


def f_weighted(alpha: float = 0.7, norm: str = "mm", cos_norm: str = "raw",
               depth: int | None = None) -> Fusion:
    """alpha·N(cos) + (1-alpha)·N(bm25); N = min-max / z-score / s/(1+s); candidates = top-`depth`
    of each retriever (others get 0 from the retriever that missed them)."""
    def norm_fn(x: np.ndarray, how: str) -> np.ndarray:
        if how == "mm":
            return minmax(x)
        if how == "z":
            return zscore(x)
        if how == "sat":
            return x / (1 + x)
        if how == "raw":
            return x
        raise ValueError(how)

    def f(s: Signals) -> np.ndarray:
        assert s.cos is not None
        b = norm_fn(s.bm25, norm)
        c = norm_fn(s.cos, cos_norm if norm != "z" else "z")
        if depth is not None:
            mb, mc = topn_mask(s.bm25, depth), topn_mask(s.cos, depth)
            b = np.where(mb, b, b.min())
            c = np.where(mc, c, c.min())
            out = alpha * c + (1 - alpha) * b
            return np.where(mb | mc, out, -1e9)
        return alpha * c + (1 - alpha) * b
    return f


def f_rrf(k: float = 60.0, w_dense: float = 1.0, w_bm25: float = 1.0) -> Fusion:
    def f(s: Signals) -> np.ndarray:
        assert s.cos is not None
        return w_dense / (k + ranks(s.cos)) + w_bm25 / (k + ranks(s.bm25))
    return f


def with_neighbours(base: Fusion, beta: float = 0.3, mode: str = "max") -> Fusion:
    """Adds beta·(best neighbour's normalised score): a turn next to a strong hit is lifted (the
    answer often sits one turn after the question it answers)."""
    def f(s: Signals) -> np.ndarray:
        x = minmax(base(s))
        p = np.where(s.prev >= 0, x[np.maximum(s.prev, 0)], 0.0)
        n = np.where(s.next >= 0, x[np.maximum(s.next, 0)], 0.0)
        nb = np.maximum(p, n) if mode == "max" else (p + n) / 2
        return x + beta * nb
    return f


def f_turn_window(w: float = 0.5, alpha: float = 0.5, beta: float = 0.5) -> Fusion:
    """(1-w)·turn-level z-fusion + w·window-level z-fusion (each turn's text joined with its
    previous and next turn: "contextual" documents), then neighbour expansion beta."""
    def f(s: Signals) -> np.ndarray:
        assert s.cos is not None
        turn = alpha * zscore(s.cos) + (1 - alpha) * zscore(s.bm25)
        win = alpha * zscore(s.extra["cos_win"]) + (1 - alpha) * zscore(s.extra["bm25_win"])
        x = (1 - w) * turn + w * win
        if beta:
            x = minmax(x)
            p = np.where(s.prev >= 0, x[np.maximum(s.prev, 0)], 0.0)
            n = np.where(s.next >= 0, x[np.maximum(s.next, 0)], 0.0)
            x = x + beta * np.maximum(p, n)
        return x
    return f


def with_session(base: Fusion, delta: float = 0.2) -> Fusion:
    """Adds delta·(max normalised score within the doc's session)."""
    def f(s: Signals) -> np.ndarray:
        x = minmax(base(s))
        smax = np.zeros(s.session.max() + 1)
        np.maximum.at(smax, s.session, x)
        return x + delta * smax[s.session]
    return f


def with_actor(base: Fusion, gamma: float = 0.1) -> Fusion:
    """Adds gamma to docs whose actor (speaker) is named in the query."""
    def f(s: Signals) -> np.ndarray:
        return minmax(base(s)) + gamma * s.actor_hit
    return f
