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
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import zvec
from totalrecall_worker.priority import call_lowered
from zvec import HnswQueryParam, Query

from ..core.search import TIERS, TierFilter
from .build_exclusion import BuildExclusion
from .build_guard import BuildMarkers
from .disk_space import SpaceGuard, free_bytes
from .vector_mirror import VectorMirror
from .zvec_probe import crash_on_open
from .zvec_schema import OUTPUT_FIELDS, QUANTIZE, VECTOR, RawHit, ZDoc, collection_schema, init_zvec
from .zvec_watchdog import ZvecWatchdog

MAX_BATCH = 1024
MAX_EF = 2048
#: The most documents one zvec query returns ("topk exceeds the maximum allowed value").
LIST_PAGE = 100_000
#: A tier mirror that could not be loaded (too large, or a write failed) is looked at again
#: after this long, at the tier's next write or build.
MIRROR_RETRY_S = 30.0
MIRROR_LOAD_BATCH = 256
log = logging.getLogger("totalrecall.indexer")
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@/+=-]{1,200}$")  # event ids: no quotes


def _keep_forever(objs: list[Any]) -> None:
    """Collections no destructor may run for, not even at interpreter exit (zvec's destructor
    closes them: `ZvecTiers.close`). A reference is leaked for each."""
    for obj in objs:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


class TierUnavailable(RuntimeError):
    """A tier takes no writes until an HNSW build has completed (see `build_guard`): its last
    build was interrupted, or a write to it just failed. Retry later; nothing is lost."""


class TierBuilding(RuntimeError):
    """The tier's HNSW build is running, or its writes and searches kept it busy past the
    search's wait: the search goes without the tier (`BuildExclusion`)."""


class ZvecTiers:
    """Owns the three collections under `root` plus `meta.json` (dim, model fingerprint)."""

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
        #: Exact searches of an fp32 tier this small are answered from an in-memory copy of it
        #: (`vector_mirror`); larger tiers are searched by HNSW anyway. Quantized tiers are
        #: not mirrored: zvec scans their unbuilt part on the quantized codes, and an fp32
        #: copy would answer differently.
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

    # --- lifecycle -------------------------------------------------------------------------
    @property
    def meta_path(self) -> Path:
        return self.root / "meta.json"

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

    def reset(self, dim: int, model: str | None) -> None:
        """Drop every collection and start empty with this dim/model (rebuild, model change)."""
        self.close()
        for tier in TIERS:
            shutil.rmtree(self.root / tier, ignore_errors=True)
            self.markers.end(tier)  # open() below starts every tier empty: nothing to repair
        self.dim, self.model, self.reindex = dim, model, {}
        self._write_meta()
        self.open()

    # --- model fingerprint -----------------------------------------------------------------
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

    # --- writes ----------------------------------------------------------------------------
    def _persist_meta(self) -> None:
        """meta.json, when an earlier write of it was refused (the disk was full)."""
        if self._meta_dirty:
            with self._meta_lock:
                if self._meta_dirty:
                    self._write_meta_or_later()

    def _writable(self, tier: str) -> Any:
        """The collection, when `tier` takes writes (call with the tier's lock held)."""
        why = self.held.get(tier)
        if why is not None:
            raise TierUnavailable(f"zvec tier {tier} takes no writes yet: {why}")
        return self.cols[tier]

    def hold(self, tier: str, why: str) -> None:
        """No more writes to `tier` until a build completed, in this process and after a
        restart (the marker)."""
        self.held[tier] = why
        # Checked against Postgres once the hold is lifted, whether or not the marker below can
        # be written (meta.json is written again before the next write if the disk refuses).
        self.verify_later(tier, f"{why}; every memory of the tier is checked against Postgres")
        try:
            self.markers.begin(tier, why)
        except OSError as exc:  # disk full: the hold still stands in this process
            log.error("cannot record the write hold of zvec tier %s: %s", tier, exc)

    def upsert(self, tier: str, docs: list[ZDoc]) -> int:
        """Waits while the tier's HNSW build runs."""
        n = 0
        with self._write(tier) as col:
            for i in range(0, len(docs), MAX_BATCH):
                chunk = docs[i: i + MAX_BATCH]
                with self.watchdog.call("upsert"):
                    statuses = col.upsert([d.to_doc() for d in chunk])
                bad = [s for s in statuses if not s.ok()]
                if bad:
                    # Schema violations raise ValueError before anything is written; a failed
                    # status is the store itself (seen after an interrupted build). Writing on
                    # could delete other docs: hold the tier until a build repaired it.
                    why = (f"zvec upsert failed for {len(bad)} of {len(chunk)} docs: "
                           f"{bad[0].code()} {bad[0].message()}".strip())
                    log.error("zvec tier %s: %s; holding its writes until an HNSW build "
                              "completed", tier, why)
                    self.hold(tier, why)
                    raise TierUnavailable(f"zvec upsert into {tier} failed: {why}")
                self._mirror_apply(tier, partial(VectorMirror.upsert, docs=chunk))
                n += len(chunk)
        return n

    def delete(self, tier: str, keys: list[str]) -> int:
        """Delete keys from one tier; returns how many existed. Waits while its build runs."""
        if not keys:
            return 0
        n = 0
        with self._write(tier) as col:
            for i in range(0, len(keys), MAX_BATCH):
                chunk = keys[i: i + MAX_BATCH]
                with self.watchdog.call("delete"):
                    statuses = col.delete(chunk)
                n += sum(1 for s in statuses if s.ok())
                if any(not s.ok() and s.code() != zvec.StatusCode.NOT_FOUND for s in statuses):
                    # Not known which docs are gone: the mirror is loaded again later.
                    self._mirrors.pop(tier, None)
                else:
                    self._mirror_apply(tier, partial(VectorMirror.delete, keys=chunk))
        return n

    # --- the in-memory mirrors of small fp32 tiers (`vector_mirror`) --------------------------
    @contextlib.contextmanager
    def _write(self, tier: str) -> Iterator[Any]:
        """The collection of `tier` to write, with its lock and its write exclusion held. A
        write that raised may have left zvec with any part of it: the mirror goes, to be
        loaded again from the collection. After the write the mirror is dropped or loaded as
        the tier's size says, with searches let in again (they use zvec meanwhile) but writes
        still waiting: the collection it copies does not change under it."""
        with self._tier_locks[tier]:
            with self._access.writing(tier):
                col = self._writable(tier)
                self.space.check(f"a write to zvec tier {tier}")
                self._persist_meta()
                try:
                    yield col
                except BaseException:
                    self._mirrors.pop(tier, None)
                    self._mirror_tried[tier] = time.monotonic()
                    raise
            self._mirror_fit(tier)

    def _mirror_apply(self, tier: str, change: Callable[[VectorMirror], None]) -> None:
        """Apply a write zvec accepted to the tier's mirror. Should that fail, the mirror goes
        (to be loaded again) rather than the write, which zvec has made."""
        mirror = self._mirrors.get(tier)
        if mirror is None:
            return
        try:
            with self._mirror_locks[tier]:
                change(mirror)
        except Exception:
            log.exception("zvec tier %s: its in-memory copy could not follow a write; it is "
                          "searched by zvec until the copy is loaded again", tier)
            self._mirrors.pop(tier, None)
            self._mirror_tried[tier] = time.monotonic()

    def has_mirror(self, tier: str) -> bool:
        """Whether `tier`'s exact searches are answered from its in-memory copy (and so go on
        while its HNSW is built)."""
        return tier in self._mirrors

    def _mirror_fit(self, tier: str) -> None:
        """(With the tier's lock held.)"""
        mirror = self._mirrors.get(tier)
        if mirror is not None:
            if len(mirror) > self.mirror_max_docs:
                self._mirrors.pop(tier, None)
                self._mirror_tried[tier] = time.monotonic()
            return
        if time.monotonic() - self._mirror_tried.get(tier, float("-inf")) >= MIRROR_RETRY_S:
            self._mirror_load(tier)

    def _mirror_load(self, tier: str) -> None:
        """Copy `tier` into a new mirror when it is an fp32 tier small enough (call with its
        lock held: no write may change the collection meanwhile)."""
        self._mirrors.pop(tier, None)
        self._mirror_tried[tier] = time.monotonic()
        if QUANTIZE[tier] is not None or tier not in self.cols:
            return
        col = self.cols[tier]
        with self._access.reading(tier):
            count = int(col.stats.doc_count)
        if count > self.mirror_max_docs:
            return
        mirror = VectorMirror(self.dim)
        with self._access.reading(tier):
            keys = self._list(col, None, count)
        # In batches: the whole tier's vectors as Python floats would take 10x their size.
        for i in range(0, len(keys), MIRROR_LOAD_BATCH):
            chunk = keys[i: i + MIRROR_LOAD_BATCH]
            with self._access.reading(tier), self.watchdog.call("query"):
                docs = col.fetch(chunk, include_vector=True)
            mirror.upsert(ZDoc.from_doc(docs[k]) for k in chunk if k in docs)
        if len(mirror) != count:  # not the whole tier: searches stay with zvec
            log.warning("zvec tier %s: %d of its %d docs could be read for its in-memory copy; "
                        "it is searched by zvec", tier, len(mirror), count)
            return
        self._mirrors[tier] = mirror

    def fetch_older(self, tier: str, cutoff_ms: int, limit: int = MAX_BATCH,
                    exclude_ids: Iterable[str] = ()) -> list[ZDoc]:
        """Up to `limit` docs of `tier` with ts < cutoff_ms, with their vectors; docs whose
        event id is in `exclude_ids` (pinned memories) are left out."""
        flt = f"ts < {int(cutoff_ms)}"
        excluded = sorted({i for i in exclude_ids if _SAFE_ID.match(i)})
        if excluded:
            flt += " and id NOT IN (" + ", ".join(f"'{i}'" for i in excluded) + ")"
        with self._access.reading(tier), self.watchdog.call("query"):
            res = self.cols[tier].query(filter=flt, topk=limit, include_vector=True)
        return [ZDoc.from_doc(d) for d in res]

    def present(self, tier: str, keys: list[str]) -> set[str]:
        """Which of `keys` can be fetched, vector included, from `tier` or another tier
        (compaction may have moved a memory before Postgres learnt its new tier)."""
        found: set[str] = set()
        for name in [tier, *(t for t in TIERS if t != tier)]:
            rest = [k for k in keys if k not in found]
            if not rest or name not in self.cols:
                continue
            with self._access.reading(name):
                for i in range(0, len(rest), MAX_BATCH):
                    found |= set(self.cols[name].fetch(rest[i: i + MAX_BATCH],
                                                       include_vector=True))
        return found

    def count(self, tier: str) -> int:
        """The tier's document count now (waits for its reads and writes in flight)."""
        with self._access.reading(tier), self.watchdog.call("query"):
            return int(self.cols[tier].stats.doc_count)

    def keys(self, tier: str) -> list[str]:
        """Every key the tier holds. zvec lists a collection by a query without a vector, of at
        most `LIST_PAGE` documents: a larger tier is listed by halves of its time range."""
        col = self.cols[tier]
        with self._access.reading(tier):
            with self.watchdog.call("query"):
                count = int(col.stats.doc_count)
            if count <= LIST_PAGE:
                return self._list(col, None, count)
            return self._list_between(col, -(2**62), 2**62)

    def _list(self, col: Any, flt: str | None, topk: int) -> list[str]:
        if topk <= 0:
            return []
        with self.watchdog.call("query"):
            return [d.id for d in col.query(filter=flt, topk=topk, output_fields=[])]

    def _list_between(self, col: Any, lo: int, hi: int) -> list[str]:
        found = self._list(col, f"ts >= {lo} and ts < {hi}", LIST_PAGE)
        if len(found) < LIST_PAGE or hi - lo <= 1:
            return found
        mid = (lo + hi) // 2
        return self._list_between(col, lo, mid) + self._list_between(col, mid, hi)

    def fetch(self, tier: str, keys: list[str]) -> dict[str, ZDoc]:
        with self._access.reading(tier):
            docs = self.cols[tier].fetch(keys, include_vector=True)
        return {k: ZDoc.from_doc(d) for k, d in docs.items()}

    def optimize(self, tier: str) -> None:
        """Build the HNSW of `tier` with its writes waiting, bracketed by its marker (see
        `build_guard`); a completed build also lifts a write hold. Reads of the tier wait or
        go without it (`BuildExclusion`)."""
        with self._tier_locks[tier]:
            self.space.check(f"the HNSW build of zvec tier {tier}")
            with self._access.building(tier):
                self.markers.begin(tier)
                try:
                    # zvec merges the tier's segments on the calling thread (a tenth or more
                    # of the build's CPU) before its build threads insert into the graph.
                    call_lowered(self.cols[tier].optimize, self.build_nice, name="zvec-build",
                                 idle=self.build_idle)
                except Exception as exc:
                    # Unknown state, as after a kill: the marker stays, writes wait for a build.
                    self.hold(tier, f"its HNSW build failed: {type(exc).__name__}: {exc}")
                    raise
                self.markers.end(tier)
                self.held.pop(tier, None)
            if tier not in self._mirrors:  # e.g. dropped by the failed write this build repairs
                self._mirror_load(tier)

    def flush(self) -> None:
        for tier, col in self.cols.items():
            with self._access.writing(tier):
                col.flush()

    # --- reads -----------------------------------------------------------------------------
    def doc_count(self, tier: str, max_age_s: float = 1.0) -> int:
        """The tier's document count, at most `max_age_s` old (search asks on every query)."""
        now = time.monotonic()
        cached = self._counts.get(tier)
        if cached is not None and now - cached[0] < max_age_s:
            return cached[1]
        with self._access.reading(tier, self.search_wait_s) as admitted:
            if not admitted:
                if cached is not None:
                    return cached[1]
                raise self._busy(tier)
            n = int(self.cols[tier].stats.doc_count)
        self._counts[tier] = (now, n)
        return n

    def search(self, tier: str, vector: list[float], topk: int,
               filter: str | TierFilter | None, ef: int = 128,
               linear: bool = False) -> list[RawHit]:
        """ANN search (HNSW; quantized tiers refined with their full vectors), or an exact scan
        with `linear` (from the tier's mirror when it has one and the filter is not a string)."""
        if linear and not isinstance(filter, str):
            with self._mirror_locks[tier]:
                mirror = self._mirrors.get(tier)
                if mirror is not None:
                    return mirror.search(vector, topk, filter)
        with self._access.reading(tier, self.search_wait_s) as admitted:
            if not admitted:
                raise self._busy(tier)
            # Only zvec's own search needs its query parameters and the filter as a string.
            param = HnswQueryParam(ef=max(min(ef, MAX_EF), topk), is_linear=linear,
                                   is_using_refiner=tier != "hot")
            zfilter = (filter.zvec() or None) if isinstance(filter, TierFilter) else filter
            with self.watchdog.call("query"):
                res = self.cols[tier].query(Query(VECTOR, vector=vector, param=param),
                                            topk=topk, filter=zfilter, output_fields=OUTPUT_FIELDS)
        return [RawHit(key=d.id, distance=float(d.score), fields=dict(d.fields or {}))
                for d in res]

    def _busy(self, tier: str) -> TierBuilding:
        why = ("its HNSW build is running" if self._access.building_now(tier)
               else f"busy for over {self.search_wait_s} s")
        return TierBuilding(f"zvec tier {tier}: {why}")

    def stats(self) -> dict[str, dict[str, float]]:
        """Per tier; a tier being built or written answers with its last stats (a build of a
        large tier takes minutes, and the health check asks)."""
        out: dict[str, dict[str, float]] = {}
        for tier, col in self.cols.items():
            with self._access.reading(tier, self.search_wait_s) as admitted:
                if admitted:
                    st = col.stats
                    self._last_stats[tier] = {
                        "doc_count": int(st.doc_count),
                        "index_completeness": float(st.index_completeness.get(VECTOR, 1.0))}
            out[tier] = dict(self._last_stats.get(tier)
                             or {"doc_count": 0, "index_completeness": 1.0})
        return out

    def disk_bytes(self) -> dict[str, int]:
        out = {}
        for tier in TIERS:
            total = 0
            for dirpath, _dirs, files in os.walk(self.root / tier):
                for f in files:
                    with contextlib.suppress(OSError):
                        total += os.path.getsize(os.path.join(dirpath, f))
            out[tier] = total
        return out
