"""Reads of a zvec collection and its HNSW build never overlap.

zvec 0.8 hangs for good when `optimize()` starts while queries of the same collection are in
flight: the build waits on the collection's write lock, the queries inside zvec's query pool, and
the process sits at 0 % CPU with every later search and write of the tier stuck behind them. Seen
under sustained load (recall at 50/s while 200 events/s were indexed: the indexer stopped for
good at its fourth build of the hot tier) and reproduced with four query threads and a build
every thousand inserts (`tests/integration/indexer/test_zvec_build_exclusion.py`).

So a build first keeps new reads of its tier out, waits until the reads in flight are done, and
lets reads in again once it has finished. A read waits for a running build at most `wait_s`:
a search then goes without that tier (a large tier's build takes minutes), background reads
(compaction, re-index checks) wait for it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


class BuildExclusion:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._reads: Counter[str] = Counter()
        self._building: set[str] = set()

    def building_now(self, tier: str) -> bool:
        with self._cond:
            return tier in self._building

    @contextmanager
    def reading(self, tier: str, wait_s: float | None = None) -> Iterator[bool]:
        """Yields True with a read of `tier` admitted, False if a build of it still ran after
        `wait_s` seconds (None: wait for it)."""
        with self._cond:
            admitted = self._cond.wait_for(lambda: tier not in self._building, timeout=wait_s)
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

    @contextmanager
    def building(self, tier: str) -> Iterator[None]:
        """Hold `tier` for a build: no new reads, and none in flight once this is entered."""
        with self._cond:
            # Another build of the tier (the caller's tier lock prevents one) would not be waited for.
            self._cond.wait_for(lambda: tier not in self._building)
            self._building.add(tier)
            self._cond.wait_for(lambda: self._reads[tier] == 0)
        try:
            yield
        finally:
            with self._cond:
                self._building.discard(tier)
                self._cond.notify_all()
