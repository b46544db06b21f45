"""The Zvec tiers' shared state (`ZvecTiers` is built on it: reads, writes, open) and their
meta.json: the embedding dim, the model fingerprint and the tiers to re-index."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.search import TIERS
from .build_exclusion import BuildExclusion
from .build_guard import BuildMarkers
from .disk_space import SpaceGuard, free_bytes
from .vector_mirror import VectorMirror
from .zvec_probe import crash_on_open
from .zvec_watchdog import ZvecWatchdog

log = logging.getLogger("totalrecall.indexer")


class TierState:
    """What the tiers' reads, writes and open share, and meta.json."""

    def __init__(self, root: Path, default_dim: int = 384,
                 optimize_threads: int | None = None, search_wait_s: float = 0.25,
                 stall_s: float = 0.0, reads_per_tier: int = 1,
                 probe: Callable[[Path], str | None] = crash_on_open,
                 mirror_max_docs: int = 20_000, build_nice: int = 0,
                 build_idle: bool = False, min_free_bytes: int = 0,
                 free: Callable[[Path], int] = free_bytes) -> None:
        self.root = Path(root)
        #: No write, build or quarantine while the state disk has less than `min_free_bytes`
        #: free (`disk_space`: zvec dies of SIGBUS writing to a full disk).
        self.space = SpaceGuard(self.root, min_free_bytes, free)
        #: meta.json could not be written (disk full): written again before the next write.
        self._meta_dirty = False
        #: Tiers `open` started empty (so far: a full disk may interrupt it, to be retried).
        self._fresh: set[str] = set()
        #: How an HNSW build runs: zvec's build threads (`init_zvec`), and the part of the build
        #: zvec does on the calling thread, at this nice value and, with `build_idle`, under
        #: `SCHED_IDLE` (`totalrecall_worker.priority`).
        self.build_nice = build_nice
        self.build_idle = build_idle
        #: Exact searches of a tier this small are answered from an in-memory copy of it
        #: (`vector_mirror`); larger tiers are searched by HNSW anyway. A quantized tier's
        #: copy holds its fp32 vectors: its exact searches are then exact (zvec scans such a
        #: tier on its codes, and only rescores the candidates they chose), and as cheap as
        #: the hot tier's (a warm tier of 17k memories: 8.8 ms a search through zvec).
        self.mirror_max_docs = mirror_max_docs
        self._mirrors: dict[str, VectorMirror] = {}
        #: A mirror is searched and changed under its tier's lock of its own, not the tier's
        #: read exclusion: a build leaves it alone (the tier's writes wait meanwhile), so the
        #: tier's exact searches go on from it while its HNSW is built.
        self._mirror_locks = {t: threading.Lock() for t in TIERS}
        #: tier -> monotonic time its missing mirror was last looked at
        self._mirror_tried: dict[str, float] = {}
        #: Opens a tier whose HNSW build was interrupted in a child process first: why that
        #: crashed, or None (`zvec_probe`).
        self.probe = probe
        #: How long a search waits for a write of its tier (or, with `reads_per_tier`, for the
        #: searches before it) before going without it (a build: not at all).
        self.search_wait_s = search_wait_s
        self._access = BuildExclusion(reads_per_tier or None)
        #: Ends the process when a zvec query or write hangs (0: off; `zvec_watchdog.py`).
        self.watchdog = ZvecWatchdog(stall_s)
        self._last_stats: dict[str, dict[str, float]] = {}
        self.optimize_threads = optimize_threads
        self.default_dim = default_dim
        self.cols: dict[str, Any] = {}
        self.dim = default_dim
        self.model: str | None = None
        #: tier -> why it must be re-indexed from Postgres (it could not be opened and was
        #: started empty, or it is checked after an interrupted build or a failed write);
        #: kept in meta.json until the re-index is done.
        self.reindex: dict[str, str] = {}
        #: tier -> why it takes no writes until a build completed
        #: (`Indexer.finish_held_builds`); from the markers at open, or a failed write.
        self.held: dict[str, str] = {}
        self.markers = BuildMarkers(self.root)
        #: tiers `open` found unopenable and quarantined (counted by the app's metrics)
        self.quarantined: list[str] = []
        # A tier's writes and its HNSW build never overlap (see `build_guard`): zvec 0.8 replays
        # the writes made during a build with their vectors shifted onto other docs after a kill.
        self._tier_locks: dict[str, threading.Lock] = {t: threading.Lock() for t in TIERS}
        self._meta_lock = threading.Lock()
        #: tier -> (monotonic time, doc count): `col.stats` costs a third of a search
        self._counts: dict[str, tuple[float, int]] = {}

    @property

    def meta_path(self) -> Path:
        return self.root / "meta.json"

    def verify_later(self, tier: str, why: str) -> None:
        """Record (durably, in meta.json) that `tier` must be checked against Postgres and its
        missing memories re-indexed (`Indexer.reindex_tiers`)."""
        with self._meta_lock:
            if tier not in self.reindex:
                self.reindex[tier] = why
                self._write_meta_or_later()

    def _write_meta_or_later(self) -> None:
        """(With the meta lock held.) meta.json now, or before the next write when the disk
        refuses it: the re-index stands in this process meanwhile."""
        try:
            self._write_meta()
            self._meta_dirty = False
        except OSError as exc:
            self._meta_dirty = True
            log.error("cannot record the zvec tiers' state in %s (%s); retried before the "
                      "next write", self.meta_path, exc)

    def _write_meta(self) -> None:
        tmp = self.meta_path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps({"dim": self.dim, "model": self.model,
                                       "reindex": self.reindex}))
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, self.meta_path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: no half-written copy left behind
            raise

    def _persist_meta(self) -> None:
        """meta.json, when an earlier write of it was refused (the disk was full)."""
        if self._meta_dirty:
            with self._meta_lock:
                if self._meta_dirty:
                    self._write_meta_or_later()
