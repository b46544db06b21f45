"""The Zvec collections: hot (fp32 HNSW), warm (int8 HNSW), cold (int4 HNSW).

zvec is single-writer per process and its calls block: every method here is synchronous and is
meant to run in a worker thread. Queries run concurrently with everything; a tier's writes wait
while its HNSW build (`optimize()`) runs, and after a crash inside a build the tier takes no
writes until a build has completed (both for zvec 0.8's crash behaviour: see `build_guard`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import zvec

from ..core.search import TIERS
from ..core.store_types import MAX_BATCH, TierBuilding, TierUnavailable
from .zvec_schema import QUANTIZE, collection_schema, init_zvec
from .zvec_tier_state import log
from .zvec_writes import TierWrites

#: Re-exported: the indexer and its tests know the tiers' errors and batch size from here.
__all__ = ["MAX_BATCH", "TierBuilding", "TierUnavailable", "ZvecTiers"]


def _keep_forever(objs: list[Any]) -> None:
    """Collections no destructor may run for, not even at interpreter exit (zvec's destructor
    closes them: `ZvecTiers.close`). A reference is leaked for each."""
    for obj in objs:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


class ZvecTiers(TierWrites):
    """Owns the three collections under `root` plus `meta.json` (dim, model fingerprint):
    opens them (quarantining one zvec cannot open), closes them, and resets them; their reads
    are `TierReads`', their writes and builds `TierWrites`'."""

    def open(self) -> None:
        init_zvec(self.optimize_threads, self.build_nice, self.build_idle)
        self.watchdog.start()
        self.root.mkdir(parents=True, exist_ok=True)
        if self.meta_path.exists():
            meta = json.loads(self.meta_path.read_text())
            self.dim = int(meta.get("dim") or self.default_dim)
            self.model = meta.get("model")
            self.reindex = dict(meta.get("reindex") or {})
        else:
            self.dim, self.model, self.reindex = self.default_dim, None, {}
            self._write_meta()
        interrupted = self.markers.pending()
        if not self.cols:  # not a retry of an open the full disk interrupted
            self._fresh, self.quarantined = set(), []
        # The disk full (StateDiskFull): what opened stays open (closing it now would lose its
        # unsaved writes: `close`), and open() goes on from the next tier when retried.
        self._open_collections(interrupted)
        fresh = self._fresh
        self.held = {}
        for tier, note in interrupted.items():
            if tier not in self.cols or tier in fresh:
                self.markers.end(tier)
                continue
            # Opens and reads fine, but a write now could delete other memories (build_guard).
            self.held[tier] = f"its HNSW build was interrupted ({note}); finishing it first"
            log.warning("zvec tier %s: the last HNSW build did not finish (%s); it takes no "
                        "writes until a build has completed, then it is checked against "
                        "Postgres", tier, note)
            self.verify_later(tier, "its HNSW build was interrupted: every memory of the tier "
                                     "is checked against Postgres")
        for tier in self.cols:
            self._mirror_load(tier)

    def _open_collections(self, interrupted: dict[str, str]) -> None:
        """Open (or create, or quarantine) each tier not open yet into `cols`; those started
        empty here go to `_fresh` (an interrupted build left nothing to fix in them)."""
        for tier in TIERS:
            if tier in self.cols:
                continue
            path = self.root / tier
            if not path.exists():
                self.cols[tier] = self._create(tier)
                self._fresh.add(tier)
                continue
            unopenable = self._open_existing(tier, path, suspect=tier in interrupted)
            if unopenable is not None:
                # Replaying zvec's log needs room: on a full disk that is no damage to
                # quarantine (`disk_space`).
                self.space.check(f"opening zvec tier {tier} ({unopenable})")
                self.cols[tier] = self._quarantine(tier, unopenable)
                self.quarantined.append(tier)
                self._fresh.add(tier)

    def _open_existing(self, tier: str, path: Path, suspect: bool) -> str | None:
        """Opens the tier's collection into `cols`; or says why it cannot be opened. A `suspect`
        one (its build was interrupted) is opened in a child process first (`self.probe`)."""
        crash = self.probe(path) if suspect else None
        if crash is not None:
            return crash
        try:
            self.cols[tier] = zvec.open(str(path))
        # zvec raises RuntimeError for a damaged segment but KeyError for a collection
        # killed inside `create_and_open` (LOCK, del.0, idmap.0, a segment folder, no
        # manifest: "Failed to find the version file"): both are quarantined.
        except (RuntimeError, KeyError, ValueError, OSError) as exc:
            if "lock" in str(exc).lower():  # another process holds it: not ours to fix
                raise
            return str(exc)
        return None

    def _create(self, tier: str) -> Any:
        self.space.check(f"creating zvec tier {tier}")
        return zvec.create_and_open(str(self.root / tier),
                                    collection_schema(tier, self.dim, QUANTIZE[tier]))

    def _quarantine(self, tier: str, reason: str) -> Any:
        """A collection zvec cannot open any more (seen after a kill inside `optimize()`, which
        rewrites a segment's RocksDB column families in place): move it aside, start the tier
        empty and record that it must be re-indexed (from Postgres, re-embedding)."""
        broken = self.root / f"{tier}.broken-{time.time_ns()}"
        # The re-index is recorded before the collection is moved: were it the other way round,
        # a crash (or a full disk refusing meta.json) in between would leave the tier started
        # empty at the next open with nothing saying it must be refilled.
        self.reindex[tier] = f"{reason} (moved to {broken.name})"
        self._write_meta()
        os.replace(self.root / tier, broken)
        log.error("zvec collection %s cannot be opened (%s): moved to %s, starting it empty; "
                  "its memories are re-indexed from Postgres", tier, reason, broken.name)
        return self._create(tier)

    def reindexed(self, tier: str) -> None:
        with self._meta_lock:
            if self.reindex.pop(tier, None) is not None:
                self._write_meta_or_later()
        self._drop_old_quarantined(tier)

    def _drop_old_quarantined(self, tier: str, keep: int = 1) -> None:
        """Once a tier is whole again, only its newest quarantined copy stays (to look at why
        it broke): each copy is a whole collection, and a tier that keeps breaking would
        otherwise fill the disk."""
        copies = sorted(self.root.glob(f"{tier}.broken-*"))  # named by time_ns: oldest first
        for old in copies[: len(copies) - keep]:
            shutil.rmtree(old, ignore_errors=True)
            log.info("zvec tier %s: removed the older quarantined copy %s", tier, old.name)

    def close(self) -> None:
        self._mirrors.clear()
        self._mirror_tried.clear()
        if self.cols and self.space.low():
            # zvec's close saves a tier's unsaved part; on a full disk that fails and its log
            # goes all the same: every write since the tier's last saved segment is lost
            # (docs/perf/2026-11-29-disk-full.md). Left unclosed, as after a kill, the log is
            # replayed at the next open.
            log.error("the state disk is full: the zvec tiers are left unclosed (their logs are "
                      "replayed at the next start) rather than closed, which would lose their "
                      "unsaved writes")
            _keep_forever(list(self.cols.values()))
            self.cols.clear()
            return
        for col in self.cols.values():
            with contextlib.suppress(Exception):
                col.close()
        self.cols.clear()

    def reset(self, dim: int, model: str | None) -> None:
        """Drop every collection and start empty with this dim/model (rebuild, model change)."""
        self.close()
        for tier in TIERS:
            shutil.rmtree(self.root / tier, ignore_errors=True)
            self.markers.end(tier)  # open() below starts every tier empty: nothing to repair
        self.dim, self.model, self.reindex = dim, model, {}
        self._write_meta()
        self.open()

    def total_docs(self) -> int:
        return sum(int(c.stats.doc_count) for c in self.cols.values())

    def accept(self, model: str | None, dim: int) -> bool:
        """May vectors of (model, dim) go into these collections? The first embedded event
        fixes the model (and the dim, re-creating the empty collections if needed)."""
        with self._meta_lock:
            if self.model is None and self.total_docs() == 0:
                if dim != self.dim:
                    self.reset(dim, model)
                else:
                    self.model = model
                    self._write_meta()
                return True
            if self.model is None:  # docs exist but no fingerprint recorded: adopt it
                if dim != self.dim:
                    return False
                self.model = model
                self._write_meta()
                return True
            return model == self.model and dim == self.dim
