"""The torch half of `python -m eval.model_adapt`: fine-tunes the packaged MiniLM on (question,
answering memory) pairs and embeds texts with the result. Run by `eval.model_adapt` in a Python
that has torch and transformers (the conversion venv of `totalrecall model build`); it imports
nothing of the repo, so it runs there as a plain script:

    python eval/adapt_train.py JOB.json OUT.npz

JOB.json holds `model` (the packaged weights' directory), `settings`, `train` (groups of
questions, their memories' texts, each question's gold rows and its hard negatives' rows),
`embed` (named lists of texts)
and optionally `save` (a directory for the tuned weights). OUT.npz gets one array per name: the
texts' vectors, embedded by the tuned model, mean pooled and normalised as sentence-transformers
does for all-MiniLM-L6-v2.

Training: in-batch negatives (each question against every memory text of the batch, its own
gold memory the target) plus one hard negative per pair, drawn from the question's
`negatives` (the driver picks them from the untuned model's vectors, which it has already:
the memories of its own conversation ranked highest that are not gold); the question's other
gold memories are masked, never counted as negatives. Seeded (`settings.seed`), on
`settings.threads` threads.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from typing import Any

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

QUERY_TOKENS = 64
DOC_TOKENS = 128
EMBED_TOKENS = 256   # the embedder's limit (n_ctx 256)


def _encode(model: Any, tok: Any, texts: list[str], max_len: int) -> torch.Tensor:
    b = tok(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    out = model(**b).last_hidden_state
    mask = b["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((out * mask).sum(1) / mask.sum(1), dim=-1)


@torch.no_grad()
def embed(model: Any, tok: Any, texts: list[str], batch: int = 64) -> np.ndarray:
    model.eval()
    if not texts:
        return np.zeros((0, model.config.hidden_size), dtype=np.float32)
    return np.concatenate([_encode(model, tok, texts[i:i + batch], EMBED_TOKENS).numpy()
                           for i in range(0, len(texts), batch)])


def _pairs(groups: list[dict[str, Any]],
           rng: random.Random) -> list[tuple[str, str, str, tuple[str, int]]]:
    out = []
    for g in groups:
        for i, (q, gold) in enumerate(zip(g["questions"], g["gold"], strict=True)):
            for gi in gold:
                out.append((q, g["docs"][gi], g["docs"][rng.choice(g["negatives"][i])],
                            (g["key"], i)))
    return out


def train(base: Any, tok: Any, groups: list[dict[str, Any]], s: dict[str, Any]) -> Any:
    rng = random.Random(s["seed"])
    torch.manual_seed(s["seed"])
    pairs = _pairs(groups, rng)
    model = copy.deepcopy(base)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], weight_decay=0.01)
    for _ in range(s["epochs"]):
        rng.shuffle(pairs)
        for start in range(0, len(pairs), s["batch"]):
            b = pairs[start:start + s["batch"]]
            q = _encode(model, tok, [p[0] for p in b], QUERY_TOKENS)
            d = _encode(model, tok, [p[1] for p in b] + [p[2] for p in b], DOC_TOKENS)
            logits = q @ d.T * s["scale"]
            same = torch.zeros_like(logits, dtype=torch.bool)
            for a in range(len(b)):
                for c in range(len(b)):
                    same[a, c] = c != a and b[c][3] == b[a][3]
            loss = torch.nn.functional.cross_entropy(logits.masked_fill(same, -1e4),
                                                     torch.arange(len(b)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    return model


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        job = json.load(f)
    torch.set_num_threads(job["settings"].get("threads", 1))
    tok = AutoTokenizer.from_pretrained(job["model"])
    base = AutoModel.from_pretrained(job["model"])
    model = train(base, tok, job["train"], job["settings"]) if job["train"] else base
    if job.get("save"):
        # The tuned weights in the packaged model's layout, for `totalrecall model build`'s
        # converter (a GGUF to run the tuned model live).
        model.save_pretrained(job["save"])
        tok.save_pretrained(job["save"])
    np.savez(argv[1], **{name: embed(model, tok, texts) for name, texts in job["embed"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
