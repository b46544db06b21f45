"""Per-namespace facts read at most every so often, and off the recall's path once known.

A recall reads a few facts about its namespace before it searches: the hosts its memories
happened on, who speaks in its conversations. They change rarely, so they are kept for a while.
Kept the plain way (read again once expired), an agent that asks once a minute, longer apart
than the keeping, pays the read on every recall, before its question is even embedded. Here an
expired value is answered at once while one read refreshes it behind; only the very first
recall of a namespace waits for the read.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

log = logging.getLogger("totalrecall.recall")


class Refreshing(Generic[K, V]):
    """Values per key, each read again at most every `ttl_s` (0: read on every call)."""

    def __init__(self, ttl_s: float, *, max_keys: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.max_keys, self.clock = ttl_s, max_keys, clock
        self._kept: dict[K, tuple[float, V]] = {}
        self._reading: dict[K, asyncio.Task[None]] = {}

    async def get(self, key: K, read: Callable[[], Awaitable[V]]) -> V:
        """The value of `key`: kept, or kept but expired (a read then refreshes it behind the
        caller), or read now when none is kept. A failed first read raises; a failed refresh
        keeps the old value (tried again on the next call)."""
        if self.ttl_s <= 0:
            return await read()
        kept = self._kept.get(key)
        if kept is None:
            value = await read()
            self._keep(key, value)
            return value
        at, value = kept
        if self.clock() - at >= self.ttl_s and key not in self._reading:
            # In a context of its own: the refresh is no request's, so its time and a failure
            # are not the Server-Timing or the `degraded` of the recall that started it.
            self._reading[key] = asyncio.create_task(self._refresh(key, read),
                                                     context=contextvars.Context())
        return value

    async def _refresh(self, key: K, read: Callable[[], Awaitable[V]]) -> None:
        try:
            self._keep(key, await read())
        except Exception as exc:  # the old value stays; the next call tries again
            log.debug("refreshing %r failed: %s", key, exc)
        finally:
            self._reading.pop(key, None)

    def _keep(self, key: K, value: V) -> None:
        if key not in self._kept and len(self._kept) >= self.max_keys:
            self._kept.clear()  # bounded: namespaces are few, but never grow unbounded
        self._kept[key] = (self.clock(), value)

    async def settled(self) -> None:
        """Wait for the refreshes under way (what a test waits on)."""
        while self._reading:
            await asyncio.gather(*list(self._reading.values()), return_exceptions=True)
