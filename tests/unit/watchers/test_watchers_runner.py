"""The runner looks again for a watcher whose source is missing, and watches it once it appears."""

from __future__ import annotations

import asyncio

from totalrecall_schema import MemoryEvent
from totalrecall_watchers.core.base import EventContext, FakeClock, Unavailable, Watcher
from totalrecall_watchers.lifecycle import WatcherRunner
from totalrecall_watchers.metrics import Metrics
from waiting import wait_for


class Appears(Watcher):
    """Unavailable until `there` is set (podman installed, a log file created…)."""

    name = "appears"
    interval_s = 0.01

    def __init__(self, ctx: EventContext) -> None:
        super().__init__(ctx)
        self.there = False
        self.checks = 0

    def check_available(self) -> str | None:
        self.checks += 1
        return None if self.there else "podman is not installed"

    def poll(self) -> list[MemoryEvent]:
        return [self.ctx.event(self.name, "system.container", "start", "a container started")]


class Vanishes(Watcher):
    """Available, then its source goes away in the middle of a poll."""

    name = "vanishes"
    interval_s = 0.01

    def __init__(self, ctx: EventContext) -> None:
        super().__init__(ctx)
        self.polls = 0

    def poll(self) -> list[MemoryEvent]:
        self.polls += 1
        raise Unavailable("socket gone")


async def test_a_source_that_appears_later_is_watched_without_a_restart() -> None:
    w = Appears(EventContext(clock=FakeClock()))
    got: list[MemoryEvent] = []

    async def handle(name: str, event: MemoryEvent) -> bool:
        got.append(event)
        return True

    runner = WatcherRunner([w], handle, Metrics(), recheck_s=0.02)
    await runner.start()
    try:
        async def unavailable() -> bool:
            return runner.status["appears"].state == "unavailable" and w.checks >= 2
        await wait_for(unavailable, timeout=5, what="the missing source looked for twice")
        assert runner.status["appears"].reason == "podman is not installed"
        assert got == []
        w.there = True

        async def watched() -> bool:
            return runner.status["appears"].state == "running" and bool(got)
        await wait_for(watched, timeout=5, what="events once the source is there")
        assert runner.health()["appears"]["state"] == "running"
    finally:
        await runner.stop()


async def test_a_source_that_goes_away_is_looked_for_again_not_given_up() -> None:
    w = Vanishes(EventContext(clock=FakeClock()))

    async def handle(name: str, event: MemoryEvent) -> bool:
        return True

    runner = WatcherRunner([w], handle, Metrics(), recheck_s=0.02)
    await runner.start()
    try:
        async def tried_again() -> bool:
            return w.polls >= 3
        await wait_for(tried_again, timeout=5, what="polls after the source went away")
        assert runner.status["vanishes"].state in ("unavailable", "running")
    finally:
        await runner.stop()


async def test_stop_ends_the_wait_for_a_missing_source_at_once() -> None:
    w = Appears(EventContext(clock=FakeClock()))

    async def handle(name: str, event: MemoryEvent) -> bool:
        return True

    runner = WatcherRunner([w], handle, Metrics(), recheck_s=3600)
    await runner.start()

    async def checked() -> bool:
        return w.checks >= 1 and runner.status["appears"].state == "unavailable"
    await wait_for(checked, timeout=5, what="the first look")
    await asyncio.wait_for(runner.stop(timeout=5), timeout=2)
    assert runner._tasks == []
