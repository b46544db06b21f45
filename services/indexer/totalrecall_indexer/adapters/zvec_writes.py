"""The Zvec tiers' writes (upserts, deletes, HNSW builds, write holds) and the in-memory
mirrors of small tiers that follow them (`vector_mirror`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import zvec
from totalrecall_worker.priority import call_lowered

from ..core.store_types import MAX_BATCH, TierUnavailable
from .vector_mirror import VectorMirror
from .zvec_reads import TierReads
from .zvec_schema import ZDoc, from_doc, to_doc
from .zvec_tier_state import log

#: A tier mirror that could not be loaded (too large, or a write failed) is looked at again
#: after this long, at the tier's next write or build.
MIRROR_RETRY_S = 30.0
MIRROR_LOAD_BATCH = 256


class TierWrites(TierReads):
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
                    statuses = col.upsert([to_doc(d) for d in chunk])
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
        """Copy `tier` into a new mirror when it is small enough (call with its lock held: no
        write may change the collection meanwhile). A quantized tier keeps each document's
        fp32 vector beside its codes (its refiner scores with them): the copy is of those."""
        self._mirrors.pop(tier, None)
        self._mirror_tried[tier] = time.monotonic()
        if tier not in self.cols:
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
            mirror.upsert(from_doc(docs[k]) for k in chunk if k in docs)
        if len(mirror) != count:  # not the whole tier: searches stay with zvec
            log.warning("zvec tier %s: %d of its %d docs could be read for its in-memory copy; "
                        "it is searched by zvec", tier, len(mirror), count)
            return
        self._mirrors[tier] = mirror

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
