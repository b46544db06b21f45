"""Per-namespace facts read at most every so often, and off the recall's path once known.

A recall reads a few facts about its namespace before it searches: the hosts its memories
happened on, who speaks in its conversations. They change rarely, so they are kept for a while.
Kept the plain way (read again once expired), an agent that asks once a minute, longer apart
than the keeping, pays the read on every recall, before its question is even embedded. Here an
expired value is answered at once while one read refreshes it behind; only the very first
recall of a namespace waits for the read.

An empty answer (no hosts, no speakers yet) is kept only `empty_ttl_s`: an agent's first recall
in a namespace often comes before its first memories, and keeping "nobody speaks here" for the
full `ttl_s` would ignore the conversation's speakers for that long once its turns arrive.
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
    """Values per key, each read again at most every `ttl_s` (0: read on every call); an empty
    value (falsy) at most every `empty_ttl_s` (capped by `ttl_s`): a namespace that has nothing
    yet costs one read behind the recalls per `empty_ttl_s`, one that never will (a log's
    speakers) the same."""

    def __init__(self, ttl_s: float, *, empty_ttl_s: float = 1.0, max_keys: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.max_keys, self.clock = ttl_s, max_keys, clock
        self.empty_ttl_s = min(empty_ttl_s, ttl_s)
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
        ttl = self.ttl_s if value else self.empty_ttl_s
        if self.clock() - at >= ttl and key not in self._reading:
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
