"""Opening a suspect zvec collection in a child process first.

A collection killed inside its HNSW build can crash zvec 0.8 natively (SIGSEGV) when it is
opened again, and a crash of the indexer at open would repeat at every restart: a crash loop
that indexes nothing. A tier whose build was interrupted (its `optimize-pending` marker) is
therefore opened once in a child process before the indexer opens it; if the child dies, the
tier is quarantined like one zvec refuses to open, and re-indexed from Postgres.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

#: What the child runs: open the collection, read its stats (which walks its segments), close.
OPEN_AND_CLOSE = (
    "import sys, zvec\n"
    "col = zvec.open(sys.argv[1])\n"
    "col.stats\n"
    "col.close()\n"
)


def crash_on_open(path: Path, timeout_s: float = 120.0, code: str = OPEN_AND_CLOSE) -> str | None:
    """Why opening the collection at `path` kills or hangs a process, or None if a child opened
    and closed it. An exception zvec raises is not a crash: the caller's own open handles those
    (the child's output is not kept)."""
    try:
        done = subprocess.run([sys.executable, "-c", code, str(path)], timeout=timeout_s,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return f"zvec did not open it within {timeout_s:.0f} s (a child process tried)"
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return f"zvec crashed opening it ({name}, in a child process)"
    return None
