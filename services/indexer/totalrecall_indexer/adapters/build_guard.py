"""Crash guard for zvec's HNSW builds (`Collection.optimize()`).

zvec 0.8 is not crash-safe around `optimize()`; two failure modes were measured with kill -9
(tests/integration/indexer/test_indexer_build_crash.py):

1. Killed inside the build. The build first seals the writing segment (its scalar-index RocksDB
   is rewritten in place, the next segment's directory is created) and only then commits the new
   manifest. A kill between the two leaves a collection that opens, fetches and searches
   normally, but whose write path is broken: every insert fails (`insert scalar failed[]`,
   `doc_id: N segment not found`), the upsert of an existing key deletes the old version before
   failing, and after further restarts doc ids are handed out again, so later writes delete or
   shadow *other* docs (`Failed to fetch vector, doc_id: N`). Running `optimize()` to completion
   before the first write repairs it. (A kill at the very start of the build can instead leave
   the collection unopenable; `ZvecTiers` quarantines and re-indexes such a tier.)
2. Written to during the build, then killed before the writing segment was flushed or closed.
   The writes made while the build ran are replayed from the write-ahead log with their vectors
   shifted onto other docs (fetch returns another memory's vector; search finds the wrong key).
   No build repairs that. So a tier's writes wait while its build runs (`ZvecTiers` holds a
   per-tier lock), and so do its searches, for another reason (`build_exclusion.py`).

For 1, every build is bracketed by a marker file `<root>/<tier>.optimize-pending`, fsynced before
the build starts and removed after it returned. A marker found at startup means the build was
interrupted: the tier takes no writes until a build has completed (see
`Indexer.finish_held_builds`). A failed zvec write leaves a marker too, so the repair also happens
after a restart.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

SUFFIX = ".optimize-pending"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BuildMarkers:
    """One marker file per tier under `root`; every change is durable before it returns."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, tier: str) -> Path:
        return self.root / f"{tier}{SUFFIX}"

    def begin(self, tier: str, why: str = "optimize") -> None:
        """Record that `tier` must not take writes after a restart until a build completed."""
        path = self.path(tier)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{time.time():.3f} pid={os.getpid()} {why}\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        _fsync_dir(self.root)

    def end(self, tier: str) -> None:
        path = self.path(tier)
        if path.exists():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            _fsync_dir(self.root)

    def pending(self) -> dict[str, str]:
        """tier -> the marker's text, for every marker left behind."""
        out: dict[str, str] = {}
        if not self.root.is_dir():
            return out
        for path in self.root.glob(f"*{SUFFIX}"):
            with contextlib.suppress(OSError):
                out[path.name[: -len(SUFFIX)]] = path.read_text(encoding="utf-8").strip()
        return out
