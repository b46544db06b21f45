"""Offline ablations: the retrieval scoring re-implemented in pure Python, no stack needed.

    python -m eval.offline [--dataset locomo|longmemeval|all] [--only NAME …] [--no-dense]

BM25 (bm25s, English stemming, OR semantics), dense all-MiniLM-L6-v2 through llama_cpp with the same
GGUF the embedder uses ($TOTALRECALL_HOME/models/all-MiniLM-L6-v2.f16.gguf, or --model), fusion
variants, neighbour expansion, speaker/actor boost and query rewriting. Embeddings are cached on
disk (`~/.cache/totalrecall-eval/emb-<model>.npz`, keyed by text hash): each text is embedded once.

Writes `eval/results/ablations.json` and `.md` (which `docs/eval.md` includes).

A model of recall-api's scoring, not the scoring itself: it is not kept in step with the service's
(candidates, fusion and ranking in `services/recall-api`), and the two have drifted. A variant that
wins here is confirmed through the API (`python -m eval`) before it is believed. The signals are in
`offline_signals.py`, the fusion variants in `offline_fusion.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import metrics as M
from .datasets import Haystack, Question, Turn, load
from .offline_fusion import (
    Fusion,
    Signals,
    f_bm25,
    f_dense,
    f_rrf,
    f_turn_window,
    f_weighted,
    minmax,
    ranks,
    topn_mask,
    with_actor,
    with_neighbours,
    with_session,
    zscore,
)
from .offline_signals import (
    Embedder,
    LlamaBackend,
    NumpyBackend,
    bm25_matrix,
    doc_text,
    find_model,
    note,
    rewrite_query,
    tf_matrix,
)
from .report import RESULTS_DIR
from .runner import summarise

#: Re-exported: the building blocks docs/eval.md's one-off studies import from here.
__all__ = ["Embedder", "Prepared", "actor_hits", "bm25_matrix", "configs", "doc_text", "main",
           "minmax", "prepare", "ranks", "run_config", "topn_mask", "zscore"]

# ------------------------------------------------------------------------------------------------
# Precomputed per-haystack data

@dataclass
class Prepared:
    h: Haystack
    turns: list[Turn]
    ids: list[str]
    prev: np.ndarray
    next: np.ndarray
    session: np.ndarray
    actors: list[str]
    bm25: dict[str, np.ndarray] = field(default_factory=dict)     # variant -> (nq, nd)
    cos: dict[str, np.ndarray] = field(default_factory=dict)


def prepare(h: Haystack) -> Prepared:
    turns = h.unique_turns()
    ids = [t.id for t in turns]
    pos = {(t.session, t.index): i for i, t in enumerate(turns)}
    prev = np.array([pos.get((t.session, t.index - 1), -1) for t in turns])
    nxt = np.array([pos.get((t.session, t.index + 1), -1) for t in turns])
    sess_ix: dict[str, int] = {}
    session = np.array([sess_ix.setdefault(t.session, len(sess_ix)) for t in turns])
    return Prepared(h, turns, ids, prev, nxt, session, [t.speaker for t in turns])


def window_texts(p: Prepared) -> list[str]:
    """Each turn with its previous and next turn of the same session (dated texts)."""
    out = []
    for i in range(len(p.turns)):
        idx = [j for j in (p.prev[i], i, p.next[i]) if j >= 0]
        out.append(" ".join(doc_text(p.turns[j], "dated") for j in idx))
    return out


def actor_hits(p: Prepared, q: Question) -> np.ndarray:
    words = set(re.findall(r"[A-Za-z]+", q.question.lower()))
    names = {a for a in set(p.actors) if a.lower() in words and a.lower() not in {"user",
                                                                                   "assistant"}}
    return np.array([1.0 if a in names else 0.0 for a in p.actors])


# ------------------------------------------------------------------------------------------------
# Running ablations

@dataclass
class Config:
    name: str
    fusion: Fusion
    bm25_text: str = "plain"
    dense_text: str = "plain"
    query: str = "raw"            # raw | rewrite
    needs_dense: bool = True
    bm25_kind: str = "bm25"       # bm25 | bm25-en33 | tf (ts_rank-like, no IDF)
    window: bool = False          # also score ±1-turn windows (Signals.extra *_win)


def run_config(dataset: str, preps: Sequence[Prepared], cfg: Config,
               emb: Embedder | None, k: int = 10) -> dict[str, Any]:
    per_q: list[dict[str, Any]] = []
    for p in preps:
        qs = p.h.questions
        if not qs:
            continue
        qtexts = [q.question if cfg.query == "raw" else rewrite_query(q.question) for q in qs]
        bkey = f"{cfg.bm25_kind}|{cfg.bm25_text}|{cfg.query}"
        if bkey not in p.bm25:
            docs = [doc_text(t, cfg.bm25_text) for t in p.turns]
            if cfg.bm25_kind == "bm25":
                p.bm25[bkey] = bm25_matrix(docs, qtexts)
            elif cfg.bm25_kind == "bm25-en33":
                p.bm25[bkey] = bm25_matrix(docs, qtexts, stopwords="en")
            else:
                p.bm25[bkey] = tf_matrix(docs, qtexts)
        cos = None
        if cfg.needs_dense:
            assert emb is not None
            ckey = f"{cfg.dense_text}|{cfg.query}"
            if ckey not in p.cos:
                dv = emb.embed([doc_text(t, cfg.dense_text) for t in p.turns])
                qv = emb.embed(qtexts)
                p.cos[ckey] = qv @ dv.T
            cos = p.cos[ckey]
        extra: dict[str, np.ndarray] = {}
        if cfg.window:
            wkey = f"window|{cfg.query}"
            if wkey not in p.bm25:
                wtexts = window_texts(p)
                p.bm25[wkey] = bm25_matrix(wtexts, qtexts)
                assert emb is not None
                p.cos[wkey] = emb.embed(qtexts) @ emb.embed(wtexts).T
            extra = {"bm25_win": p.bm25[wkey], "cos_win": p.cos[wkey]}
        for i, q in enumerate(qs):
            sig = Signals(bm25=p.bm25[bkey][i], cos=None if cos is None else cos[i],
                          prev=p.prev, next=p.next, session=p.session,
                          actor_hit=actor_hits(p, q), extra={k: v[i] for k, v in extra.items()})
            score = cfg.fusion(sig)
            order = np.argsort(-score, kind="stable")[:k]
            ranked = [p.ids[j] for j in order]
            if dataset == "locomo":
                sc = M.locomo_scores(ranked, q.gold)
            else:
                sc = M.longmemeval_scores(ranked, q.gold, q.gold_sessions, p.h.session_of)
            per_q.append({"qid": q.qid, "category": q.category, "scores": sc})
    return summarise(dataset, per_q)


def headline(dataset: str, summary: dict[str, Any]) -> dict[str, float]:
    if dataset == "locomo":
        r = summary["cats 1-4"]
        return {"R@5": r["R@5"], "R@10": r["R@10"], "Hit@5": r["Hit@5"], "MRR": r["MRR"]}
    r = summary["all"]
    return {"turn_any@5": r.get("turn_any@5", 0.0), "turn_all@5": r.get("turn_all@5", 0.0),
            "session_any@5": r["session_any@5"], "turn_MRR": r.get("turn_MRR", 0.0)}


def configs(dense: bool) -> list[Config]:
    C = Config
    lex = [
        C("bm25 (bm25s 33 stopwords: README baseline)", f_bm25, needs_dense=False,
          bm25_kind="bm25-en33"),
        C("bm25", f_bm25, needs_dense=False),
        C("bm25 nospeaker", f_bm25, bm25_text="nospeaker", needs_dense=False),
        C("bm25 nospeaker +actor0.1", with_actor(f_bm25, 0.1), bm25_text="nospeaker",
          needs_dense=False),
        C("bm25 dated", f_bm25, bm25_text="dated", needs_dense=False),
        C("bm25 rewrite", f_bm25, query="rewrite", needs_dense=False),
        C("tf-no-idf (ts_rank-like)", f_bm25, needs_dense=False, bm25_kind="tf"),
        C("bm25 +nb0.3", with_neighbours(f_bm25, 0.3), needs_dense=False),
        C("bm25 +actor0.1", with_actor(f_bm25, 0.1), needs_dense=False),
    ]
    if not dense:
        return lex
    W = f_weighted
    return [
        *lex,
        C("dense", f_dense),
        C("dense dated", f_dense, dense_text="dated"),
        C("dense rewrite", f_dense, query="rewrite"),
        C("rrf k60", f_rrf(60)),
        C("rrf k10", f_rrf(10)),
        C("0.7cos+0.3sat(bm25) (OpenClaw)", W(0.7, "sat")),
        C("0.7cos+0.3mm(bm25)", W(0.7, "mm")),
        C("0.5cos+0.5mm(bm25)", W(0.5, "mm")),
        C("0.5mm(cos)+0.5mm(bm25)", W(0.5, "mm", "mm")),
        C("0.6mm(cos)+0.4mm(bm25)", W(0.6, "mm", "mm")),
        C("0.4mm(cos)+0.6mm(bm25)", W(0.4, "mm", "mm")),
        C("z 0.5", W(0.5, "z")),
        C("z 0.4", W(0.4, "z")),
        C("z 0.6", W(0.6, "z")),
        C("z 0.5 depth50", W(0.5, "z", depth=50)),
        C("z 0.5 dated(both)", W(0.5, "z"), bm25_text="dated", dense_text="dated"),
        C("z 0.5 dated(bm25)", W(0.5, "z"), bm25_text="dated"),
        C("z 0.5 +nb0.2", with_neighbours(W(0.5, "z"), 0.2)),
        C("z 0.5 +nb0.3", with_neighbours(W(0.5, "z"), 0.3)),
        C("z 0.5 +nb0.5", with_neighbours(W(0.5, "z"), 0.5)),
        C("z 0.5 +sess0.2", with_session(W(0.5, "z"), 0.2)),
        C("z 0.5 +actor0.05", with_actor(W(0.5, "z"), 0.05)),
        C("z 0.5 +actor0.1", with_actor(W(0.5, "z"), 0.1)),
        C("z 0.5 rewrite", W(0.5, "z"), query="rewrite"),
        C("z 0.5 dated +nb0.5", with_neighbours(W(0.5, "z"), 0.5), bm25_text="dated",
          dense_text="dated"),
        C("z 0.5 dated +window w0.5", f_turn_window(0.5, beta=0.0), bm25_text="dated",
          dense_text="dated", window=True),
        C("z 0.5 dated +window w0.5 +nb0.5", f_turn_window(0.5), bm25_text="dated",
          dense_text="dated", window=True),
        C("z 0.5 dated +window w0.7 +nb0.5", f_turn_window(0.7), bm25_text="dated",
          dense_text="dated", window=True),
    ]


def to_markdown(results: dict[str, dict[str, dict[str, float]]]) -> str:
    names = list(dict.fromkeys(n for ds in results.values() for n in ds))
    lines = ["| variant | LoCoMo R@5 | R@10 | Hit@5 | MRR | LME turn any@5 | turn all@5 | "
             "session any@5 | turn MRR |", "|---|" + "---:|" * 8]
    for n in names:
        lo = results.get("locomo", {}).get(n, {})
        lm = results.get("longmemeval", {}).get(n, {})

        def f(d: dict[str, float], m: str) -> str:
            return f"{d[m]:.3f}" if m in d else ""
        lines.append(f"| {n} | {f(lo, 'R@5')} | {f(lo, 'R@10')} | {f(lo, 'Hit@5')} | "
                     f"{f(lo, 'MRR')} | {f(lm, 'turn_any@5')} | {f(lm, 'turn_all@5')} | "
                     f"{f(lm, 'session_any@5')} | {f(lm, 'turn_MRR')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eval.offline", description=__doc__)
    ap.add_argument("--dataset", choices=["locomo", "longmemeval", "all"], default="all")
    ap.add_argument("--only", nargs="*", help="only variants whose name contains one of these")
    ap.add_argument("--exclude", nargs="*", help="skip variants whose name contains one of these")
    ap.add_argument("--no-dense", action="store_true")
    ap.add_argument("--model", default=None, help="GGUF path (default: the embedder's)")
    ap.add_argument("--backend", choices=["auto", "llama", "numpy"], default="auto",
                    help="auto: llama.cpp when the GGUF exists, else numpy MiniLM")
    ap.add_argument("--n-ctx", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "ablations.json")
    args = ap.parse_args(argv)
    with contextlib.suppress(OSError):
        os.nice(10)  # share the 2 cores politely

    emb = None
    if not args.no_dense:
        model = find_model(args.model)
        if args.backend == "llama" or (args.backend == "auto" and model is not None):
            if model is None:
                ap.error("no GGUF model found (use --model or `totalrecall model build`)")
            emb = Embedder(LlamaBackend(model, n_ctx=args.n_ctx, n_threads=args.threads))
        else:
            emb = Embedder(NumpyBackend())
        note(f"dense: {emb.fingerprint} (cache {emb.cache_path}, {len(emb.cache)} cached)")
    cfgs = configs(emb is not None)
    if args.only:
        cfgs = [c for c in cfgs if any(o in c.name for o in args.only)]
    if args.exclude:
        cfgs = [c for c in cfgs if not any(o in c.name for o in args.exclude)]
    previous: dict[str, Any] = {}
    if args.out.exists():
        previous = json.loads(args.out.read_text()).get("results", {})
    results: dict[str, dict[str, dict[str, float]]] = {k: dict(v) for k, v in previous.items()}
    datasets = ["locomo", "longmemeval"] if args.dataset == "all" else [args.dataset]
    for ds in datasets:
        preps = [prepare(h) for h in load(ds, limit=args.limit)]
        results.setdefault(ds, {})
        for cfg in cfgs:
            t0 = time.monotonic()
            summ = run_config(ds, preps, cfg, emb)
            results[ds][cfg.name] = headline(ds, summ)
            note(f"[{ds}] {cfg.name:<36} {results[ds][cfg.name]}  ({time.monotonic() - t0:.1f}s)")
    if args.limit is None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"results": results}, indent=1) + "\n")
        md = to_markdown(results)
        args.out.with_suffix(".md").write_text(md)
        print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
