"""A baseline of baselines.py behind the JSON-lines protocol of adapter.py, in a process of its own
(so that its memory is its own, like every other system's):

    python -m bench.peers.baseline_adapter fts5|bm25s|hybrid [GGUF]
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from .baselines import Bm25sPeer, PlainHybridPeer, SqliteFtsPeer
from .workload import Doc

KINDS = ("fts5", "bm25s", "hybrid")


def make(kind: str, model: Path | None) -> Any:
    if kind == "fts5":
        return SqliteFtsPeer()
    if kind == "bm25s":
        return Bm25sPeer()
    if kind == "hybrid" and model is not None:
        return PlainHybridPeer(model)
    raise SystemExit(f"usage: baseline_adapter {'|'.join(KINDS)} [GGUF] (hybrid needs the GGUF)")


def docs_of(raw: Sequence[dict[str, Any]]) -> list[Doc]:
    return [Doc(str(d["id"]), str(d["text"]), datetime.fromisoformat(d["ts"]), None) for d in raw]


def answer(peer: Any, req: dict[str, Any]) -> dict[str, Any]:
    op = req.get("op")
    if op == "info":
        return {"config": peer.config}
    if op in ("add", "seed"):
        docs = docs_of(req["docs"])
        peer.add(req["ns"], docs)
        return {"added": len(docs)}
    if op == "flush":
        peer.flush()
        return {}
    if op == "search":
        t0 = time.perf_counter()
        ids = peer.search(req["ns"], req["query"], int(req["k"]))
        return {"ids": ids, "ms": (time.perf_counter() - t0) * 1000}
    return {"error": f"unknown op {op}"}


def serve(peer: Any, inp: TextIO, out: TextIO) -> None:
    peer.start()
    try:
        for line in inp:
            if not line.strip():
                continue
            req = json.loads(line)
            if req.get("op") == "quit":
                break
            try:
                res = answer(peer, req)
            except Exception as exc:  # noqa: BLE001 - reported to the runner, which stops
                traceback.print_exc()
                res = {"error": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(res) + "\n")
            out.flush()
    finally:
        peer.stop()


def main(argv: Sequence[str]) -> None:
    if not argv:
        make("", None)
    serve(make(argv[0], Path(argv[1]) if len(argv) > 1 else None), sys.stdin, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
