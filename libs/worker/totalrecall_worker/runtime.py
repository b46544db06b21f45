"""The running part of a worker: its pull consumers, its background tasks, readiness and the
one shutdown sequence."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from .pull import PullConsumer
from .stopping import stop_task

log = logging.getLogger("totalrecall.worker")


@dataclass
class _Background:
    task: asyncio.Task[Any]
    #: None: cancelled at stop; else it ends by itself once `running` is false, within this (s).
    drain_s: float | None
    #: Called at stop so that a drained task notices at once (e.g. sets the event it waits on).
    wake: Callable[[], object] | None


class WorkerRuntime:
    """Start consumers and tasks once the service is up; `stop()` ends them in order:
    not ready and no new fetch → drained tasks finish (bounded) → consumers finish their batch
    and unsubscribe → the rest is cancelled."""

    def __init__(self) -> None:
        #: What /health reports: serving (set by the service once everything started).
        self.ready = False
        self._running = False
        self.consumers: list[PullConsumer] = []
        self._background: list[_Background] = []

    @property
    def running(self) -> bool:
        """True from `start()` to `stop()`: drained tasks loop while it is."""
        return self._running

    def start(self) -> None:
        self._running = True

    async def consume(self, consumer: PullConsumer) -> PullConsumer:
        """Subscribe `consumer` (retrying while NATS cannot) and start reading it."""
        await consumer.start()
        self.consumers.append(consumer)
        return consumer

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str | None = None,
              drain_s: float | None = None, wake: Callable[[], object] | None = None,
              ) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._background.append(_Background(task, drain_s, wake))
        return task

    def every(self, interval_s: float, fn: Callable[[], Awaitable[object]], *,
              what: str) -> asyncio.Task[Any]:
        """Run `fn` now and then every `interval_s` until stop (a failure is logged)."""
        async def loop() -> None:
            while True:
                try:
                    await fn()
                except Exception:
                    log.exception("%s failed", what)
                await asyncio.sleep(interval_s)

        return self.spawn(loop(), name=what)

    def halt(self) -> None:
        """The first step of `stop()`, for a service that has more to stop before the drain:
        not ready, no new fetch, drained tasks told to end."""
        self.ready = False
        self._running = False
        for consumer in self.consumers:
            consumer.stop_fetching()
        for b in self._background:
            if b.wake is not None:
                b.wake()

    async def stop(self) -> None:
        self.halt()
        background, self._background = self._background, []
        for b in background:
            if b.drain_s is not None:
                await stop_task(b.task, grace_s=b.drain_s)
        consumers, self.consumers = self.consumers, []
        for consumer in consumers:
            await consumer.stop()
        for b in background:
            if b.drain_s is None:
                await stop_task(b.task)
