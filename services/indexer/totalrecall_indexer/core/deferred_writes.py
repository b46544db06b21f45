"""Zvec writes kept back while their tier's HNSW builds, so that ingest goes on meanwhile.

A tier takes no writes while it builds (`stores/build_guard.py`: zvec 0.8 replays writes made
during a build onto the wrong vectors after a kill). Ingest used to wait for the build whole,
then wrote the backlog at once, and recall paid for that burst
(`docs/perf/2026-11-28-ingest-pacing.md`). Now a batch whose tier is building writes its
Markdown and Postgres rows as usual and leaves its Zvec documents here; they are written, in
the order they came, as soon as the build ended (`end`).

Nothing is acked early: each deferred batch gets a future that resolves once its documents are
in Zvec (or fails with `StoreUnavailable`, and the batch is redelivered). A crash meanwhile
leaves those messages unacked, and their redelivery is idempotent (Markdown skips what it has,
Postgres and Zvec upsert by key).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ..stores.zvec_schema import ZDoc
from ..stores.zvec_tiers import TierUnavailable
from .state import IndexState, StoreUnavailable

log = logging.getLogger("totalrecall.indexer")


@dataclass
class _Deferred:
    docs: list[ZDoc]
    done: asyncio.Future[None]
    #: `IndexState.generation` when deferred: vectors for collections re-created since are
    #: not written (the batch is redelivered and checked again).
    generation: int


class DeferredWrites:
    """Which tiers build now, the Zvec documents waiting for them, and the ingest writes that
    went straight to a tier (a build starts only once those ended)."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._building: set[str] = set()
        self._waiting: dict[str, list[_Deferred]] = {}
        self._direct: dict[str, int] = {}
        self._quiet: dict[str, asyncio.Event] = {}

    def building(self, tier: str) -> bool:
        return tier in self._building

    @property
    def docs_waiting(self) -> int:
        return sum(len(d.docs) for ds in self._waiting.values() for d in ds)

    @property
    def crowded(self) -> bool:
        """More documents wait than `defer_max_docs`: ingest should wait for the build too."""
        return self.docs_waiting > self.state.cfg.defer_max_docs

    def defer(self, tier: str, docs: list[ZDoc]) -> asyncio.Future[None]:
        """Keep `docs` until `tier`'s build ended; the future resolves once they are written."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tier, []).append(
            _Deferred(docs, done, self.state.generation))
        self.state.metrics.deferred_docs.set(self.docs_waiting)
        return done

    @asynccontextmanager
    async def direct(self, tier: str) -> AsyncIterator[None]:
        """An ingest write going straight to `tier` (which is not building)."""
        self._direct[tier] = self._direct.get(tier, 0) + 1
        self._quiet.setdefault(tier, asyncio.Event()).clear()
        try:
            yield
        finally:
            self._direct[tier] -= 1
            if self._direct[tier] == 0:
                self._quiet[tier].set()

    async def begin(self, tier: str) -> None:
        """From now on ingest defers `tier`'s Zvec writes; returns once the ones already
        under way ended (the build would otherwise hold them, and the write lock with them)."""
        self._building.add(tier)
        if self._direct.get(tier, 0):
            await self._quiet[tier].wait()

    async def end(self, tier: str) -> None:
        """The build of `tier` ended (or failed): write what waited for it, in the order it
        came, then let ingest write to the tier directly again."""
        st = self.state
        async with st.write_lock:
            waiting = self._waiting.pop(tier, [])
            self._building.discard(tier)
            st.metrics.deferred_docs.set(self.docs_waiting)
            if waiting:
                await self._write(tier, waiting)

    async def _write(self, tier: str, waiting: list[_Deferred]) -> None:
        st = self.state
        current = [d for d in waiting if d.generation == st.generation]
        for d in waiting:
            if d.generation != st.generation:
                d.done.set_exception(StoreUnavailable(
                    "the Zvec collections were re-created while the batch waited"))
        latest: dict[str, ZDoc] = {}
        for d in current:  # the later write of a key wins, as it would have unwaited
            for doc in d.docs:
                if doc.key not in st.forgotten:
                    latest.pop(doc.key, None)
                    latest[doc.key] = doc
        docs = list(latest.values())
        try:
            if docs:
                await asyncio.to_thread(st.tiers.upsert, tier, docs)
        except (OSError, TierUnavailable, StoreUnavailable) as exc:
            if isinstance(exc, TierUnavailable):
                st.builds_wanted.set()
            self._fail(current, f"zvec {tier}: {exc}")
            return
        except Exception as exc:  # redelivered: the batch path tells data errors apart
            log.exception("writing %d documents deferred for the build of %s failed",
                          len(docs), tier)
            self._fail(current, f"zvec {tier}: {type(exc).__name__}: {exc}")
            return
        st.new_since_optimize[tier] += len(docs)
        for d in current:
            d.done.set_result(None)

    @staticmethod
    def _fail(waiting: list[_Deferred], why: str) -> None:
        for d in waiting:
            d.done.set_exception(StoreUnavailable(why))

    def abandon(self) -> None:
        """At shutdown: what still waits is redelivered (nothing was acked)."""
        for waiting in self._waiting.values():
            self._fail(waiting, "the indexer stopped before the build ended")
        self._waiting.clear()
        self.state.metrics.deferred_docs.set(0)
