"""Admission control for recall: a bounded number at once, a bounded wait for the rest.

Every recall in flight shares the same two cores. Past the machine's capacity, taking every
request at once slows all of them alike: at 50 recalls/s on a 2-core machine that could serve
~35, the median recall took 14 s and a third timed out (docs/perf/2026-11-26-sustained-load.md).
So at most `limit` recalls run at once; the others queue in arrival order, and one that cannot
start within `wait_s` is refused at once (HTTP 503 with Retry-After) instead of answering after
the prompt it was for has gone: the caller (the OpenClaw plugin, an agent) goes on without memory
for that prompt, and the recalls admitted keep their latency.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import Counter, Gauge


class Overloaded(Exception):
    """No slot within the wait: the reason goes to the caller."""


class Admission:
    def __init__(self, limit: int, wait_s: float, shed: Counter, in_flight: Gauge) -> None:
        self.limit, self.wait_s = limit, wait_s
        self._slots = asyncio.Semaphore(limit) if limit > 0 else None
        self._shed, self._in_flight = shed, in_flight

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the `limit` slots for the body (no limit: `limit` 0)."""
        if self._slots is None:
            yield
            return
        try:
            await asyncio.wait_for(self._slots.acquire(), self.wait_s)
        except TimeoutError:
            self._shed.inc()
            raise Overloaded(f"overloaded: {self.limit} recalls in flight and none finished "
                             f"within {self.wait_s:g} s; retry shortly") from None
        self._in_flight.inc()
        try:
            yield
        finally:
            self._in_flight.dec()
            self._slots.release()
