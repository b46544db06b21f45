"""The question map of the recall API (`recall/query_map.py` there): a linear map of a
question's MiniLM vector towards the vectors of the memories that answer it, learned here.

    python -m eval.query_adapter cv      # leave one LoCoMo conversation out; LME and LogQA apart
    python -m eval.query_adapter build   # learn it on every LoCoMo conversation, write the file

What is learned: W (d × d) minimising, over training questions q with their gold memories G(q)
among the memories of their own conversation D(q), the cross-entropy of softmax(W q · d / τ)
over d in D(q) against the uniform distribution over G(q), plus λ‖W − I‖² (a map that stays
near the identity unless the data says otherwise). Full-batch gradient descent from W = I, a
fixed number of steps, float64: the same data gives the same map.

It is learned on LoCoMo's conversations only. LongMemEval's chats and LogQA's machine logs stay
out of it, so that `cv` can tell whether a map learned on one kind of memory harms the others:
each is scored by dense retrieval alone (the question's vector against every memory of its
namespace), with the identity beside it. The live figures come from `python -m eval` with the
map on and off (`TR_RECALL_QUERY_MAP=false`).

Vectors come from the embedder's own GGUF, through the offline embedding cache
(`offline_signals.Embedder`): the texts embedded are the memories' `embedding_text()`, as the
embedder embeds them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from totalrecall_schema import MemoryEvent

from .datasets import REPO, load_locomo, load_longmemeval
from .logqa import load_logqa
from .offline_signals import Embedder, LlamaBackend
from .report import RESULTS_DIR, provenance
from .stack import default_model_path

#: The model family the map is learned for: the embedder's fingerprints start with it.
MODEL = "all-MiniLM-L6-v2"
OUT = REPO / "services" / "recall-api" / "totalrecall_recall_api" / "models" / \
    f"{MODEL}.query-map.npz"
#: LoCoMo's question categories with evidence (5, adversarial, asks what was never said).
CATEGORIES = {"1", "2", "3", "4"}


@dataclass(frozen=True)
class Settings:
    lam: float = 0.1      # pull towards the identity
    tau: float = 0.05     # softmax temperature (cosines span about 0.2-0.8)
    lr: float = 0.05
    steps: int = 200


@dataclass
class Group:
    """Questions asked of one set of memories: their vectors, the memories', each question's
    gold memories (row indices into `docs`)."""

    key: str
    questions: np.ndarray
    docs: np.ndarray
    gold: list[np.ndarray]


def _embedded(event: dict[str, object]) -> str:
    return MemoryEvent.model_validate(event).embedding_text()


def locomo_groups(emb: Embedder) -> list[Group]:
    out = []
    for h in load_locomo(categories=CATEGORIES):
        turns = h.unique_turns()
        at = {t.id: i for i, t in enumerate(turns)}
        qs = [q for q in h.questions if any(g in at for g in q.gold)]
        out.append(Group(h.key, emb.embed([q.question for q in qs]),
                         emb.embed([_embedded(t.to_ingest("eval")) for t in turns]),
                         [np.array([at[g] for g in sorted(q.gold) if g in at]) for q in qs]))
    return out


def longmemeval_groups(emb: Embedder) -> list[Group]:
    out = []
    for h in load_longmemeval():
        q = h.questions[0]
        turns = h.unique_turns()
        at = {t.id: i for i, t in enumerate(turns)}
        gold = np.array([at[g] for g in sorted(q.gold) if g in at])
        if len(gold):
            out.append(Group(h.key, emb.embed([q.question]),
                             emb.embed([_embedded(t.to_ingest("eval")) for t in turns]), [gold]))
    return out


def logqa_groups(emb: Embedder) -> list[Group]:
    out = []
    for s in load_logqa():
        at = {ln.id: i for i, ln in enumerate(s.lines)}
        out.append(Group(s.name, emb.embed([q.question for q in s.questions]),
                         emb.embed([_embedded(ln.to_ingest("eval")) for ln in s.lines]),
                         [np.array([at[g] for g in sorted(q.gold)]) for q in s.questions]))
    return out


def train(groups: Sequence[Group], s: Settings = Settings()) -> np.ndarray:
    """W learned on `groups` (module docstring)."""
    d = groups[0].docs.shape[1]
    eye = np.eye(d)
    w = eye.copy()
    n = sum(len(g.gold) for g in groups)
    for _ in range(s.steps):
        grad = np.zeros_like(w)
        for g in groups:
            logits = (g.questions @ w.T) @ g.docs.T / s.tau
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            for i, gold in enumerate(g.gold):
                p[i, gold] -= 1.0 / len(gold)
            grad += ((p / s.tau) @ g.docs).T @ g.questions
        w -= s.lr * (grad / n + s.lam * (w - eye))
    return w


def recall_at(w: np.ndarray, g: Group, k: int) -> np.ndarray:
    """Per question, the share of its gold memories among the `k` nearest (dense alone)."""
    scores = (g.questions @ w.T) @ g.docs.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.array([len(set(t) & set(gold)) / len(gold) for t, gold in zip(top, g.gold,
                                                                              strict=True)])


def any_at(w: np.ndarray, g: Group, k: int) -> np.ndarray:
    """Per question, whether any gold memory is among the `k` nearest."""
    return (recall_at(w, g, k) > 0).astype(float)


def embedder(model: Path) -> Embedder:
    """The offline embedding cache over `model` (the stack's GGUF, `stack.default_model_path`)."""
    return Embedder(LlamaBackend(model.expanduser(), n_threads=2))


def cross_validate(emb: Embedder, s: Settings, longmemeval: bool = False) -> dict[str, object]:
    """LoCoMo leave one conversation out; LogQA (and LongMemEval: its 24k turns take the
    better part of an hour to embed on 2 cores) under the map learned on all of LoCoMo, which
    they are not."""
    locomo = locomo_groups(emb)
    eye = np.eye(locomo[0].docs.shape[1])
    folds = []
    for held in locomo:
        w = train([g for g in locomo if g is not held], s)
        for k in (5, 10):
            folds.append({"held out": held.key, "k": k, "n": len(held.gold),
                          "identity": float(recall_at(eye, held, k).mean()),
                          "map": float(recall_at(w, held, k).mean())})
    w = train(locomo, s)
    other = []
    # Each LogQA system on its own; LongMemEval's questions in two halves (by position).
    parts = [(f"LogQA {g.key} Hit@5", [g]) for g in logqa_groups(emb)]
    if longmemeval:
        lme = longmemeval_groups(emb)
        parts += [(f"LongMemEval turn any@5, half {h}", lme[h::2]) for h in (0, 1)]
    for name, part in parts:
        ident = np.concatenate([any_at(eye, g, 5) for g in part])
        mapped = np.concatenate([any_at(w, g, 5) for g in part])
        other.append({"set": name, "n": len(ident), "identity": float(ident.mean()),
                      "map": float(mapped.mean())})
    return {"settings": s.__dict__, "locomo folds": folds, "other sets": other}



def build(emb: Embedder, s: Settings, out: Path) -> dict[str, object]:
    """Learn the map on every LoCoMo conversation and write it (`recall/query_map.py`'s file)."""
    locomo = locomo_groups(emb)
    w = train(locomo, s)
    about = {"learned on": "LoCoMo development conversations, categories 1-4 "
                           f"({sum(len(g.gold) for g in locomo)} questions, "
                           f"{', '.join(g.key for g in locomo)})",
             "model": emb.fingerprint, "settings": s.__dict__,
             "commit": provenance()["commit"],
             "made by": "python -m eval.query_adapter build"}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez_compressed(tmp, matrix=w.astype(np.float32), model=np.array(MODEL),
                        about=np.array(json.dumps(about)))
    tmp.replace(out)
    return about


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("cv", "build"))
    ap.add_argument("--model", type=Path, default=None,
                    help="the GGUF (default: the stack's, `eval.stack.default_model_path`)")
    ap.add_argument("--out", type=Path, default=OUT, help="build: the map file")
    ap.add_argument("--lam", type=float, default=Settings.lam)
    ap.add_argument("--steps", type=int, default=Settings.steps)
    ap.add_argument("--with-longmemeval", action="store_true",
                    help="cv: LongMemEval too (its turns embedded once, then cached)")
    args = ap.parse_args(argv)
    s = Settings(lam=args.lam, steps=args.steps)
    emb = embedder(args.model or default_model_path())
    if args.what == "build":
        print(json.dumps(build(emb, s, args.out), indent=2))
        return 0
    result = cross_validate(emb, s, args.with_longmemeval)
    for f in result["locomo folds"]:  # type: ignore[attr-defined]
        print(f"LoCoMo {f['held out']} held out: dense R@{f['k']} {f['identity']:.3f} -> "
              f"{f['map']:.3f} (n={f['n']})")
    for o in result["other sets"]:  # type: ignore[attr-defined]
        print(f"{o['set']}: {o['identity']:.3f} -> {o['map']:.3f} (n={o['n']})")
    path = RESULTS_DIR / "query_adapter_cv.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
