"""Answer a request subject on a plain nats-py subscription, several requests at a time.

For a hot RPC (the indexer's vector search, on every recall's critical path) FastStream's
per-message machinery costs about as much CPU as the work itself; nats-py alone runs callbacks
one by one, so each request gets a task of its own, at most `concurrency` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

#: request bytes → reply bytes
Answer = Callable[[bytes], Awaitable[bytes]]


class ConcurrentResponder:
    def __init__(self, subject: str, answer: Answer, *, concurrency: int = 4) -> None:
        self.subject, self.answer = subject, answer
        self._slots = asyncio.Semaphore(concurrency)
        self._in_flight: set[asyncio.Task[None]] = set()
        self._sub: Any = None

    async def start(self, nc: Any) -> None:
        """Subscribe on `nc`; confirm it with `confirm_subscriptions` before announcing ready."""
        self._sub = await nc.subscribe(self.subject, cb=self._on_request)

    async def stop(self, timeout: float = 10.0) -> None:
        """Unsubscribe, then give the requests in hand up to `timeout` seconds to be answered."""
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=timeout)

    async def _on_request(self, msg: Any) -> None:
        task = asyncio.create_task(self._respond(msg))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _respond(self, msg: Any) -> None:
        async with self._slots:
            reply = await self.answer(msg.data)
        if msg.reply:
            with contextlib.suppress(Exception):  # the asker went away
                await msg.respond(reply)
