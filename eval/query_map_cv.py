"""LoCoMo with the question map learned without the conversation asked: the live figure of the
map on conversations it has not seen (the shipped map was learned on all five dev conversations,
so the LoCoMo section of `python -m eval` is in-sample for it).

    python -m eval.query_map_cv            # starts its own stack; about 10 minutes on 2 cores

1. For each conversation, a map is learned on the other four (`eval.query_adapter.train`,
   the shipped map's settings, vectors from the stack's GGUF through the offline cache).
2. One stack, the map off (`TR_RECALL_QUERY_MAP=false`): LoCoMo ingested once, every question
   asked (the control).
3. Per conversation, a second recall API over the same NATS, Postgres and indexer, with that
   conversation's map (`TR_RECALL_QUERY_MAP_PATH`): its questions asked again. Same memories,
   same vectors, same code: the difference is the map's.

Writes `eval/results/locomo_query_map_cv.json`; `docs/eval.md` shows it under LoCoMo.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from . import metrics as M
from .client import RecallClient
from .datasets import load_locomo
from .query_adapter import MODEL, Settings, embedder, locomo_groups, train
from .report import RESULTS_DIR, provenance
from .runner import run_dataset
from .stack import SecondApi, Stack, default_model_path, recall_api_env

OUT = RESULTS_DIR / "locomo_query_map_cv.json"
HEADLINE = ("R@10", "R@5", "MRR")


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _means(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {m: round(float(np.mean([r["scores"][m] for r in rows])), 4) for m in HEADLINE}


def summarise(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> dict[str, Any]:
    """Per held-out conversation, per class and pooled: the map off and on (cats 1-4)."""
    on_by = {r["qid"]: r for r in on}
    pairs = [(r, on_by[r["qid"]]) for r in off
             if r["qid"] in on_by and r["category"] in M.LOCOMO_HEADLINE]

    def row(sel: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
        return {"n": len(sel), "off": _means([a for a, _ in sel]), "on": _means([b for _, b in sel])}

    convs = sorted({a["haystack"] for a, _ in pairs})
    return {"pooled": row(pairs),
            "folds": {c: row([p for p in pairs if p[0]["haystack"] == c]) for c in convs},
            "classes": {f"{c} {M.LOCOMO_CATEGORY_NAMES[c]}": row(
                [p for p in pairs if p[0]["category"] == c]) for c in M.LOCOMO_HEADLINE
                if any(p[0]["category"] == c for p in pairs)}}


def run(out_path: Path = OUT) -> dict[str, Any]:

    s = Settings()
    haystacks = load_locomo()
    groups = {g.key: g for g in locomo_groups(embedder(default_model_path()))}
    tag = f"qm{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="tr-qmcv-") as tmp, \
            Stack(log=_log, extra_env={"TR_RECALL_QUERY_MAP": "false"}) as stack:
        client = RecallClient(stack.api)
        control = run_dataset(client, "locomo", haystacks, tag=tag, log=_log)
        client.close()
        base = recall_api_env(stack)
        mapped: list[dict[str, Any]] = []
        for h in haystacks:
            w = train([g for k, g in groups.items() if k != h.key], s)
            path = Path(tmp) / f"map-without-{h.key}.npz"
            np.savez(path, matrix=w.astype(np.float32), model=np.array(MODEL))
            api = SecondApi(base, {"TR_RECALL_QUERY_MAP": "true",
                                   "TR_RECALL_QUERY_MAP_PATH": str(path)},
                            Path(tmp) / f"recall-api-{h.key}.log")
            try:
                c2 = RecallClient(api.url)
                mapped += run_dataset(c2, "locomo", [h], tag=tag, log=_log)["questions"]
                c2.close()
            finally:
                api.close()
    on_by = {r["qid"]: r for r in mapped}
    result = {"run_at": control["run_at"], **provenance(), "settings": s.__dict__,
              **summarise(control["questions"], mapped),
              "questions": [{"qid": r["qid"], "haystack": r["haystack"],
                             "category": r["category"], "off": r["scores"],
                             "on": on_by[r["qid"]]["scores"]}
                            for r in control["questions"] if r["qid"] in on_by]}
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    return result


def _cells(row: dict[str, Any]) -> str:
    return " | ".join(f"{row['off'][m]:.3f} → {row['on'][m]:.3f} ({row['on'][m] - row['off'][m]:+.3f})"
                      for m in HEADLINE)


def render(result: dict[str, Any]) -> str:
    """The section `docs/eval.md` shows under LoCoMo."""
    machine = str(result.get("machine", "")).removeprefix("machine: ")
    dirty = " (uncommitted changes)" if result.get("dirty") else ""
    lines = ["#### LoCoMo with the question map learned without the conversation asked", "",
             f"Run {result['run_at']} at {str(result.get('commit'))[:10]}{dirty} on {machine} "
             "(`python -m eval.query_map_cv`): each conversation's questions asked of a recall "
             "API whose question map was learned on the other four, against the same stack "
             "with the map off. The LoCoMo table above is the recall API's default, the map off "
             "(`TR_RECALL_QUERY_MAP`); this is what turning it on does on conversations it has "
             "not seen (the shipped map learned on all five would be in-sample there).", "",
             "| held out | n | " + " | ".join(f"{m} off → on" for m in HEADLINE) + " |",
             "|---|---:|" + "---|" * len(HEADLINE)]
    for name, row in result["folds"].items():
        lines.append(f"| {name} | {row['n']} | {_cells(row)} |")
    lines.append(f"| **pooled** | {result['pooled']['n']} | {_cells(result['pooled'])} |")
    for name, row in result["classes"].items():
        lines.append(f"| class {name} | {row['n']} | {_cells(row)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    print(render(run(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
