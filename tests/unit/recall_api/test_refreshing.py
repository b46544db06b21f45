"""Per-namespace facts kept, refreshed behind the recalls once known (`recall/refreshing.py`)."""

from __future__ import annotations

import asyncio

import pytest
from totalrecall_recall_api.recall.refreshing import Refreshing


class Source:
    def __init__(self) -> None:
        self.value, self.reads, self.fail = 1, 0, False
        self.release = asyncio.Event()
        self.release.set()

    async def read(self) -> int:
        self.reads += 1
        await self.release.wait()
        if self.fail:
            raise RuntimeError("the store is away")
        return self.value


async def test_an_expired_value_is_answered_at_once_and_refreshed_behind() -> None:
    now = [0.0]
    cache: Refreshing[str, int] = Refreshing(30.0, clock=lambda: now[0])
    src = Source()
    assert await cache.get("ns", src.read) == 1 and src.reads == 1  # the first read waits
    src.value = 2
    now[0] = 10.0
    assert await cache.get("ns", src.read) == 1 and src.reads == 1  # fresh: not read
    now[0] = 31.0
    src.release.clear()  # the refresh is slow: the recall does not wait for it
    assert await asyncio.wait_for(cache.get("ns", src.read), 1) == 1
    assert await cache.get("ns", src.read) == 1 and src.reads == 2  # one refresh at a time
    src.release.set()
    await cache.settled()
    assert await cache.get("ns", src.read) == 2 and src.reads == 2


async def test_a_failed_refresh_keeps_the_value_and_is_tried_again() -> None:
    now = [0.0]
    cache: Refreshing[str, int] = Refreshing(30.0, clock=lambda: now[0])
    src = Source()
    await cache.get("ns", src.read)
    src.fail, now[0] = True, 40.0
    assert await cache.get("ns", src.read) == 1
    await cache.settled()
    src.fail, src.value = False, 3
    assert await cache.get("ns", src.read) == 1  # still expired: refreshed again
    await cache.settled()
    assert await cache.get("ns", src.read) == 3 and src.reads == 3


async def test_a_failed_first_read_raises_and_nothing_is_kept() -> None:
    cache: Refreshing[str, int] = Refreshing(30.0)
    src = Source()
    src.fail = True
    with pytest.raises(RuntimeError):
        await cache.get("ns", src.read)
    src.fail = False
    assert await cache.get("ns", src.read) == 1 and src.reads == 2


async def test_no_keeping_reads_every_time_and_keys_are_bounded() -> None:
    src = Source()
    off: Refreshing[str, int] = Refreshing(0.0)
    for _ in range(3):
        await off.get("ns", src.read)
    assert src.reads == 3
    small: Refreshing[str, int] = Refreshing(30.0, max_keys=2)
    for ns in ("a", "b", "c"):
        await small.get(ns, src.read)
    assert len(small._kept) <= 2


async def test_a_refresh_is_not_timed_as_the_recall_that_started_it() -> None:
    from totalrecall_recall_api.recall.stage_times import add, collecting

    now = [0.0]
    cache: Refreshing[str, int] = Refreshing(30.0, clock=lambda: now[0])

    async def read() -> int:
        add("hosts", 0.002)
        return 1
    await cache.get("ns", read)
    now[0] = 31.0
    with collecting() as times:
        await cache.get("ns", read)
        await cache.settled()
    assert "hosts" not in times


async def test_an_empty_value_is_read_again_sooner() -> None:
    """A namespace asked about before its first memories: its speakers are known a second after
    they arrive, not after the full keeping time."""
    now = [0.0]
    cache: Refreshing[str, frozenset[str]] = Refreshing(30.0, empty_ttl_s=1.0,
                                                        clock=lambda: now[0])
    speakers: frozenset[str] = frozenset()
    reads = 0

    async def read() -> frozenset[str]:
        nonlocal reads
        reads += 1
        return speakers

    assert await cache.get("ns", read) == frozenset() and reads == 1
    speakers = frozenset({"caroline"})
    now[0] = 0.5
    assert await cache.get("ns", read) == frozenset() and reads == 1  # kept a moment
    now[0] = 1.5
    assert await cache.get("ns", read) == frozenset()  # expired: refreshed behind
    await cache.settled()
    assert reads == 2 and await cache.get("ns", read) == {"caroline"}
    now[0] = 20.0  # a value that is not empty keeps the full time
    assert await cache.get("ns", read) == {"caroline"} and reads == 2


async def test_the_empty_keeping_never_exceeds_the_keeping() -> None:
    cache: Refreshing[str, list[str]] = Refreshing(0.5, empty_ttl_s=1.0)
    assert cache.empty_ttl_s == 0.5
