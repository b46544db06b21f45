"""Who may use the Zvec collections right now: searches (in threads, without the write lock),
HNSW builds (one at a time), and the rare re-creation of every collection (rebuild, first
vectors of another dimension), which waits until neither is running and keeps new ones out."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .state import IndexState

log = logging.getLogger("totalrecall.indexer")


class CollectionGate:
    def __init__(self, state: IndexState) -> None:
        self.state = state
        #: Held while an HNSW build runs (and while the collections are re-created or closed).
        self.optimize_lock = asyncio.Lock()
        self._searches = 0
        self._no_searches = asyncio.Event()
        self._no_searches.set()
        self.resetting = False

    @asynccontextmanager
    async def searching(self) -> AsyncIterator[None]:
        """Count a search in flight (the caller checked `resetting` first)."""
        self._searches += 1
        self._no_searches.clear()
        try:
            yield
        finally:
            self._searches -= 1
            if self._searches == 0:
                self._no_searches.set()

    async def reset_tiers(self, dim: int, model: str | None) -> None:
        """Re-create the collections once no search or HNSW build is using them."""
        self.resetting = True
        try:
            async with self.optimize_lock:
                await self._no_searches.wait()
                await asyncio.to_thread(self.state.tiers.reset, dim, model)
                self.state.generation += 1
                self.state.reindex_state.clear()
        finally:
            self.resetting = False

    async def close_stores(self, optimize_wait_s: float = 10.0) -> None:
        """Close Zvec (after any running HNSW build; zvec survives an unclean exit anyway)."""
        self.resetting = True
        try:
            await asyncio.wait_for(self.optimize_lock.acquire(), timeout=optimize_wait_s)
        except TimeoutError:
            log.warning("HNSW build still running at shutdown; leaving zvec to close at exit")
            return
        try:
            await self._no_searches.wait()
            await asyncio.to_thread(self.state.tiers.close)
        finally:
            self.optimize_lock.release()
