"""Reads of a zvec collection never overlap its writes or its HNSW build.

zvec 0.8 hangs for good when a write takes a collection's write lock while queries of that
collection are in flight: `optimize()` (the HNSW build) or an upsert that seals a segment waits
on the lock, the queries wait inside zvec's query pool, and the process sits at 0 % CPU with
every later search and write of the tier stuck behind them. Seen twice under sustained load
(recall at 50/s while 200 events/s were indexed: once at a build, once at an upsert) and
reproduced with four query threads beside a writer and repeated builds
(`tests/integration/indexer/test_zvec_build_exclusion.py`).

So a tier is either read or written or built (alone): a write or a build keeps new reads out,
waits until the reads in flight are done, and lets reads in again when it is done. Reads of one
tier take turns as well (`max_readers`, the indexer's `ZVEC_READS_PER_TIER`, 1): later
sustained-load runs hung with queries of a tier in zvec and no write or build in flight. A read
that finds the tier building goes without it at once when it has a wait limit (a search: a build
takes seconds to minutes); one that finds it written or read waits up to its limit. Background
reads (compaction, re-index checks) have no limit.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager


class BuildExclusion:
    def __init__(self, max_readers: int | None = None) -> None:
        #: Reads of one tier at once (None: any number).
        self.max_readers = max_readers
        self._cond = threading.Condition()
        self._reads: Counter[str] = Counter()
        #: tier -> "write" or "build": held (or waited for) by a writer
        self._held: dict[str, str] = {}

    def building_now(self, tier: str) -> bool:
        with self._cond:
            return self._held.get(tier) == "build"

    @contextmanager
    def reading(self, tier: str, wait_s: float | None = None) -> Iterator[bool]:
        """Yields True with a read of `tier` admitted, False when it is building (and `wait_s`
        is set) or still written after `wait_s` seconds (None: wait for either)."""
        with self._cond:
            if wait_s is not None and self._held.get(tier) == "build":
                admitted = False
            else:
                admitted = self._cond.wait_for(lambda: self._may_read(tier), timeout=wait_s)
            if admitted:
                self._reads[tier] += 1
        if not admitted:
            yield False
            return
        try:
            yield True
        finally:
            with self._cond:
                self._reads[tier] -= 1
                self._cond.notify_all()

    def _may_read(self, tier: str) -> bool:
        return tier not in self._held and (self.max_readers is None
                                           or self._reads[tier] < self.max_readers)

    @contextmanager
    def writing(self, tier: str, kind: str = "write") -> Iterator[None]:
        """Hold `tier` alone for a write or (`kind` "build") an HNSW build: no new reads, and
        none in flight once this is entered. Writers of a tier take turns."""
        with self._cond:
            self._cond.wait_for(lambda: tier not in self._held)
            self._held[tier] = kind
            self._cond.wait_for(lambda: self._reads[tier] == 0)
        try:
            yield
        finally:
            with self._cond:
                del self._held[tier]
                self._cond.notify_all()

    def building(self, tier: str) -> AbstractContextManager[None]:
        return self.writing(tier, "build")
