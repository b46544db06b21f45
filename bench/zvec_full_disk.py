"""What zvec 0.8 does on a full file system: the facts the indexer's free-space margin rests on.

A child process creates a collection on a small tmpfs, upserts 200 documents (each batch
recorded once acknowledged), fills the disk and upserts on, then ends: killed (`os._exit`, no
destructor runs), or after `close()` (`--close`). The parent then reports how the child ended
(zvec writes through memory-mapped files: a store into a page with no block behind it is
SIGBUS), whether the collection opens while the disk is still full, and, once space is back,
whether every acknowledged document is there.

    sudo .venv/bin/python bench/zvec_full_disk.py          # mounting a tmpfs needs root
    sudo .venv/bin/python bench/zvec_full_disk.py --close  # close() on the full disk
    sudo .venv/bin/python bench/zvec_full_disk.py --flush  # flush() after each batch before

Recorded: docs/perf/2026-11-29-disk-full.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, sys
import numpy as np
import zvec
from zvec import (CollectionSchema, DataType, Doc, FieldSchema, HnswIndexParam, InvertIndexParam,
                  MetricType, VectorSchema)
path, acked_log, filler, before = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
flush, close = "flush" in sys.argv[5:], "close" in sys.argv[5:]
zvec.init(log_level=zvec.LogLevel.WARN)
schema = CollectionSchema(name="hot", fields=[
    FieldSchema("namespace", DataType.STRING, index_param=InvertIndexParam()),
    FieldSchema("summary", DataType.STRING)],
    vectors=[VectorSchema("semantic", DataType.VECTOR_FP32, 384, index_param=HnswIndexParam(
        metric_type=MetricType.COSINE, m=16, ef_construction=100))])
col = zvec.create_and_open(path, schema)
rng = np.random.default_rng(0)
with open(acked_log, "a") as log:
    for start in range(0, before + 400, 20):
        if start == before:
            with open(filler, "wb", buffering=0) as f:
                for size in (1 << 20, 1 << 12, 1):
                    while True:
                        try:
                            f.write(b"\0" * size)
                        except OSError:
                            break
            print(json.dumps({"filled_at": start}), flush=True)
        docs = [Doc(id=f"k{i}", vectors={"semantic": rng.random(384).astype("float32").tolist()},
                    fields={"namespace": "ns", "summary": f"event {i} " * 5})
                for i in range(start, start + 20)]
        try:
            statuses = col.upsert(docs)
        except Exception as exc:
            print(json.dumps({"at": start, "raised": f"{type(exc).__name__}: {exc}"}), flush=True)
            continue
        bad = [s for s in statuses if not s.ok()]
        if bad:
            print(json.dumps({"at": start, "failed": len(bad), "status": bad[0].message()}),
                  flush=True)
            continue
        if flush and start < before:
            col.flush()
        log.write(" ".join(d.id for d in docs) + "\n")
        log.flush()
        os.fsync(log.fileno())
if close:
    try:
        col.close()
    except Exception as exc:
        print(json.dumps({"close raised": str(exc)[:120]}), flush=True)
os._exit(0)
"""

OPEN = r"""
import json, sys, zvec
zvec.init(log_level=zvec.LogLevel.WARN)
keys = open(sys.argv[2]).read().split()
try:
    col = zvec.open(sys.argv[1])
except Exception as exc:
    print(json.dumps({"opened": False, "error": f"{type(exc).__name__}: {exc}"}))
else:
    got = col.fetch(keys)
    print(json.dumps({"opened": True, "doc_count": int(col.stats.doc_count),
                      "acked": len(keys), "acked_missing": len(keys) - len(got)}))
"""


def run(code: str, *args: str) -> tuple[int, list[dict]]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, check=False)
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    return done.returncode, lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    modes = [m for m in ("flush", "close") if f"--{m}" in args]
    if os.geteuid() != 0:
        print("mounting a tmpfs needs root", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], check=True)
        try:
            col, acked, filler = mnt / "hot", Path(tmp) / "acked.txt", mnt / "filler"
            rc, events = run(CHILD, str(col), str(acked), str(filler), "200", *modes)
            how = (f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}")
            more = f" (+{len(events) - 3} more)" if len(events) > 3 else ""
            print(f"writer on the full disk: {how}; it said {events[:3]}{more}")
            _rc, opened_full = run(OPEN, str(col), str(acked))
            print(f"open while the disk is full: {opened_full}")
            filler.unlink()
            _rc, opened_free = run(OPEN, str(col), str(acked))
            print(f"open once space is back: {opened_free}")
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
