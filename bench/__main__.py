"""`make bench`: every benchmark in turn, each printing its own figures.

    python -m bench                 # embedder, query path, indexer (10k), recall (20k and 100k)
    python -m bench recall --n 1000000

Each prints its figures as ratios to the hardware measured in the same run (llama.cpp alone),
with the targets beside them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
BENCHES: dict[str, list[str]] = {
    "embedder": ["-m", "bench.embedder_bench"],
    "query-path": ["-m", "bench.query_path"],
    "indexer": [str(HERE / "indexer_bench.py"), "--n", "10000"],
    "recall": ["-m", "bench.recall_bench", "--n", "20000", "--queries", "300"],
    "recall-100k": ["-m", "bench.recall_bench", "--n", "100000", "--queries", "300"],
}


def main(argv: list[str]) -> int:
    names = [a for a in argv if a in BENCHES] or list(BENCHES)
    extra = [a for a in argv if a not in BENCHES]
    failed = []
    for name in names:
        print(f"\n=== bench: {name} ===", flush=True)
        cmd = [sys.executable, *BENCHES[name], *(extra if len(names) == 1 else [])]
        if subprocess.run(cmd, cwd=HERE.parent).returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
