"""Domain adaptation of the packaged MiniLM, scored on conversations it was not tuned on.

    python -m eval.model_adapt cv       # LoCoMo leave one conversation out (~45 min on 2 cores)
    python -m eval.model_adapt others   # tuned on all five: LogQA and LongMemEval, dense alone
    python -m eval.model_adapt live --keep DIR   # each fold's tuned weights (from `cv --keep`)
                                                 # as a GGUF in a live stack (~4 min a fold)

The question map (`eval.query_adapter`) moves a question's vector only. Here the whole model is
tuned on LoCoMo's (question, evidence turn) pairs (`eval/adapt_train.py`, which needs torch and
transformers: it runs in the conversion venv of `totalrecall model build`, or the Python given by
`--python`). Each fold tunes a model on four dev conversations and embeds the fifth: its
questions as the recall API embeds them (without the speakers' names, `core/speakers.py`) and
its turns as the embedder embeds them (`embedding_text()`).

Scored for each held-out conversation, untuned against tuned:

- dense alone: R@5 and R@10 of the question's vector against every turn;
- fused offline: z-scored cosine and BM25 (dated texts) mixed α : 1 − α, the better neighbour's
  score × 0.5 added, the named speaker's turns + 0.1 (`eval.offline`'s building blocks, the
  closest offline stand-in for the recall API's ranking), at α = 0.5, 0.6 and 0.7, so that a
  gain that needs more weight on the vectors shows as such, and the untuned model gets the same
  chance.

`others` tunes on all five conversations and scores what it must not harm, dense alone: LogQA
Hit@5 per system and LongMemEval turn any@5 / all@5 on two halves (every other haystack; the
first `--lme` of each half, the rest take long to embed on 2 cores).

`live` takes each fold's tuned weights that `cv --keep DIR` left, converts them to a GGUF with
`totalrecall model build`'s numpy converter (q8_0, as the default model), and runs
`python -m eval --dataset locomo` twice on a copy of the data holding that conversation alone:
with the default model and with the tuned one (`TR_EMBEDDER_MODEL_PATH`), the recall API's
settings unchanged. Its figures are the real pipeline's, every conversation unseen by its model.

Writes `eval/results/model_adapt.json`; the figures and their reading are in docs/eval.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from totalrecall_recall_api.api import without_speakers

from . import metrics as M
from .datasets import load_locomo, load_longmemeval
from .logqa import load_logqa
from .offline import actor_hits, bm25_matrix, doc_text, prepare
from .offline_fusion import Signals, f_weighted, with_actor, with_neighbours
from .query_adapter import CATEGORIES, _embedded
from .report import RESULTS_DIR, provenance

OUT = RESULTS_DIR / "model_adapt.json"
TRAINER = Path(__file__).with_name("adapt_train.py")
ALPHAS = (0.5, 0.6, 0.7)
SETTINGS: dict[str, Any] = {"epochs": 2, "lr": 2e-5, "batch": 32, "scale": 20.0,
                            "hard_negatives": 20, "seed": 0, "threads": 2}


def _python(explicit: str | None) -> str:
    if explicit:
        return explicit
    from totalrecall.model_build import ensure_convert_venv
    from totalrecall.model_files import tr_home

    return str(ensure_convert_venv(tr_home()))


def _weights() -> str:
    from totalrecall.model_build import find_source_model

    return str(find_source_model())


def _run(python: str, job: dict[str, Any]) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory(prefix="model-adapt-") as tmp:
        spec, out = Path(tmp) / "job.json", Path(tmp) / "out.npz"
        spec.write_text(json.dumps(job))
        subprocess.run([python, str(TRAINER), str(spec), str(out)], check=True)
        with np.load(out) as z:
            return {k: z[k] for k in z.files}


def locomo_groups() -> list[dict[str, Any]]:
    out = []
    for h in load_locomo(categories=CATEGORIES):
        p = prepare(h)
        at = {t: i for i, t in enumerate(p.ids)}
        qs = [q for q in h.questions if any(g in at for g in q.gold)]
        speakers = {t.speaker for t in p.turns}
        out.append({"key": h.key, "h": h, "p": p, "qs": qs,
                    "questions": [without_speakers(q.question, speakers) for q in qs],
                    "docs": [_embedded(t.to_ingest("eval")) for t in p.turns],
                    "gold": [[at[g] for g in sorted(q.gold) if g in at] for q in qs]})
    return out


def _plain(g: dict[str, Any]) -> dict[str, Any]:
    return {k: g[k] for k in ("key", "questions", "docs", "gold")}


def hard_negatives(qv: np.ndarray, dv: np.ndarray, gold: list[list[int]],
                   n: int) -> list[list[int]]:
    """Per question, the `n` memories the untuned model ranks highest that are not gold."""
    order = np.argsort(-(qv @ dv.T), axis=1)
    out = []
    for row, g in zip(order, gold, strict=True):
        gold_rows = set(g)
        out.append([int(j) for j in row if int(j) not in gold_rows][:n])
    return out


def _training(groups: list[dict[str, Any]], base: dict[str, np.ndarray],
              prefix: str = "") -> list[dict[str, Any]]:
    """The groups as the trainer takes them, each question with its hard negatives, from the
    untuned vectors `base` holds under `<prefix><key>/questions` and `…/docs`."""
    return [{**_plain(g), "negatives": hard_negatives(
        base[f"{prefix}{g['key']}/questions"], base[f"{prefix}{g['key']}/docs"], g["gold"],
        SETTINGS["hard_negatives"])} for g in groups]


def dense_recall(qv: np.ndarray, dv: np.ndarray, gold: list[list[int]], k: int) -> np.ndarray:
    top = np.argsort(-(qv @ dv.T), axis=1, kind="stable")[:, :k]
    return np.array([len(set(t.tolist()) & set(g)) / len(g) for t, g in zip(top, gold,
                                                                             strict=True)])


def fused_recall(g: dict[str, Any], cos: np.ndarray, alpha: float) -> float:
    p, qs = g["p"], g["qs"]
    if "bm25" not in g:
        g["bm25"] = bm25_matrix([doc_text(t, "dated") for t in p.turns], [q.question for q in qs])
    bm = g["bm25"]
    fusion = with_actor(with_neighbours(f_weighted(alpha, "z"), 0.5), 0.1)
    r = []
    for i, q in enumerate(qs):
        s = Signals(bm25=bm[i], cos=cos[i], prev=p.prev, next=p.next, session=p.session,
                    actor_hit=actor_hits(p, q), extra={})
        ranked = [p.ids[j] for j in np.argsort(-fusion(s), kind="stable")[:10]]
        r.append(M.locomo_scores(ranked, q.gold)["R@10"])
    return float(np.mean(r))


def cross_validate(python: str, keep: Path | None = None) -> dict[str, Any]:
    groups = locomo_groups()
    weights = _weights()
    embed_all = {f"{g['key']}/{part}": g[part] for g in groups for part in ("questions", "docs")}
    base = _run(python, {"model": weights, "settings": SETTINGS, "train": [],
                         "embed": embed_all})
    folds = []
    for held in groups:
        print(f"tuning without {held['key']}", file=sys.stderr, flush=True)
        tuned = _run(python, {"model": weights, "settings": SETTINGS,
                              "train": _training([g for g in groups if g is not held], base),
                              "embed": {"q": held["questions"], "d": held["docs"]},
                              "save": str(keep / f"without-{held['key']}") if keep else None})
        bq, bd = base[f"{held['key']}/questions"], base[f"{held['key']}/docs"]
        row: dict[str, Any] = {"held out": held["key"], "n": len(held["gold"])}
        for k in (5, 10):
            row[f"dense R@{k}"] = [float(dense_recall(bq, bd, held["gold"], k).mean()),
                                   float(dense_recall(tuned["q"], tuned["d"], held["gold"],
                                                      k).mean())]
        for a in ALPHAS:
            row[f"fused R@10, alpha {a}"] = [fused_recall(held, bq @ bd.T, a),
                                             fused_recall(held, tuned["q"] @ tuned["d"].T, a)]
        print(json.dumps(row), file=sys.stderr, flush=True)
        folds.append(row)
    return {"folds": folds}


def other_sets(python: str, lme_per_half: int) -> dict[str, Any]:
    groups = locomo_groups()
    parts: list[tuple[str, list[dict[str, Any]], str]] = []
    for s in load_logqa():
        at = {ln.id: i for i, ln in enumerate(s.lines)}
        parts.append((f"LogQA {s.name}", [{
            "key": s.name, "questions": [q.question for q in s.questions],
            "docs": [_embedded(ln.to_ingest("eval")) for ln in s.lines],
            "gold": [[at[g] for g in sorted(q.gold)] for q in s.questions]}], "Hit@5"))
    lme = []
    for h in load_longmemeval():
        turns = h.unique_turns()
        at = {t.id: i for i, t in enumerate(turns)}
        gold = [at[g] for g in sorted(h.questions[0].gold) if g in at]
        if gold:
            lme.append({"key": h.key, "questions": [h.questions[0].question],
                        "docs": [_embedded(t.to_ingest("eval")) for t in turns],
                        "gold": [gold]})
    for half in (0, 1):
        parts.append((f"LongMemEval half {half}", lme[half::2][:lme_per_half], "turn"))
    embed = {f"{name}/{g['key']}/{part}": g[part]
             for name, gs, _ in [*parts, ("LoCoMo", groups, "")] for g in gs
             for part in ("questions", "docs")}
    job = {"model": _weights(), "settings": SETTINGS}
    base = _run(python, {**job, "train": [], "embed": embed})
    tuned = _run(python, {**job, "train": _training(groups, base, "LoCoMo/"),
                          "embed": {k: v for k, v in embed.items()
                                    if not k.startswith("LoCoMo/")}})
    rows = []
    for name, gs, kind in parts:
        scores: dict[str, list[float]] = {}
        for vecs in (base, tuned):  # untuned, then tuned
            r = np.concatenate([dense_recall(vecs[f"{name}/{g['key']}/questions"],
                                             vecs[f"{name}/{g['key']}/docs"], g["gold"], 5)
                                for g in gs])
            if kind == "Hit@5":
                scores.setdefault("Hit@5", []).append(float((r > 0).mean()))
            else:
                scores.setdefault("turn any@5", []).append(float((r > 0).mean()))
                scores.setdefault("turn all@5", []).append(float((r == 1).mean()))
        rows.append({"set": name, "n": sum(len(g["gold"]) for g in gs), **scores})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return {"sets": rows}


#: What sentence-transformers keeps beside the weights (the pooling): the converter reads it.
POOLING_FILES = ("1_Pooling", "modules.json", "sentence_bert_config.json",
                 "config_sentence_transformers.json")


def _gguf(tuned: Path) -> Path:
    """The tuned weights in `tuned` as a verified q8_0 GGUF beside them (made once)."""
    import shutil

    from totalrecall.model_build import build

    source = Path(_weights())
    for name in POOLING_FILES:
        src, dst = source / name, tuned / name
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        elif src.exists():
            shutil.copy2(src, dst)
    out = tuned / "model.q8_0.gguf"
    build(out, outtype="q8_0", converter="numpy", source=tuned)
    return out


def _eval_alone(key: str, model: Path, out: Path) -> dict[str, Any]:
    """LoCoMo's conversation `key` alone through a fresh stack embedding with `model`."""
    import os

    from .datasets import default_data_dir

    data = out / "data" / "locomo"
    data.mkdir(parents=True, exist_ok=True)
    every = json.loads((default_data_dir() / "locomo" / "locomo_dev.json").read_text())
    (data / "locomo_dev.json").write_text(json.dumps([c for c in every if c["sample_id"] == key]))
    subprocess.run([sys.executable, "-m", "eval", "--dataset", "locomo", "--no-docs",
                    "--data-dir", str(out / "data"), "--out-dir", str(out)],
                   env={**os.environ, "TR_EMBEDDER_MODEL_PATH": str(model)}, check=True)
    summary: dict[str, Any] = json.loads((out / "locomo.json").read_text())["summary"]
    return summary


def live(keep: Path) -> dict[str, Any]:
    from .stack import default_model_path

    default = default_model_path()
    folds = []
    for tuned in sorted(keep.glob("without-*")):
        key = tuned.name.removeprefix("without-")
        with tempfile.TemporaryDirectory(prefix="model-adapt-live-") as tmp:
            base = _eval_alone(key, default, Path(tmp) / "default")
            new = _eval_alone(key, _gguf(tuned), Path(tmp) / "tuned")
        row = {"held out": key, "default": base, "tuned": new}
        print(json.dumps({"held out": key, "R@10": [base["cats 1-4"]["R@10"],
                                                     new["cats 1-4"]["R@10"]]}),
              file=sys.stderr, flush=True)
        folds.append(row)
    return {"folds": folds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("cv", "others", "live"))
    ap.add_argument("--python", default=None,
                    help="a Python with torch and transformers (default: the conversion venv)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="cv: where to leave each fold's tuned weights (without-<conversation>); "
                         "live: where to find them")
    ap.add_argument("--lme", type=int, default=8, help="others: LongMemEval haystacks per half")
    args = ap.parse_args(argv)
    if args.what == "live":
        if args.keep is None:
            ap.error("live needs --keep DIR (the weights `cv --keep DIR` left)")
        result = live(args.keep)
    else:
        python = _python(args.python)
        result = (cross_validate(python, args.keep) if args.what == "cv"
                  else other_sets(python, args.lme))
    saved = json.loads(OUT.read_text()) if OUT.exists() else {}
    saved[args.what] = {**result, "settings": SETTINGS, **provenance(),
                        "made by": f"python -m eval.model_adapt {args.what}"}
    OUT.write_text(json.dumps(saved, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
