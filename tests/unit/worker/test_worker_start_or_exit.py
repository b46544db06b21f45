"""`start_or_exit`: a worker whose start fails behind a serving HTTP ends (fakes only)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from totalrecall_worker import EX_SOFTWARE, start_or_exit


async def test_a_failed_start_ends_the_process_with_70_and_says_why(
        caplog: pytest.LogCaptureFixture) -> None:
    exits: list[int] = []

    async def serve() -> None:
        raise RuntimeError("consumer refused")

    hook = start_or_exit(serve, service="indexer", on_failure=exits.append)
    with caplog.at_level(logging.CRITICAL), pytest.raises(RuntimeError, match="refused"):
        await hook()
    assert exits == [EX_SOFTWARE] == [70]
    record = next(r for r in caplog.records if r.levelno == logging.CRITICAL)
    assert "the indexer could not start: exiting (status 70)" in record.getMessage()
    assert record.exc_info is not None and "consumer refused" in str(record.exc_info[1])


async def test_without_on_failure_the_failure_is_logged_and_raised_only(
        caplog: pytest.LogCaptureFixture) -> None:
    async def serve() -> None:
        raise OSError("no space")

    with caplog.at_level(logging.CRITICAL), pytest.raises(OSError, match="no space"):
        await start_or_exit(serve, service="embedder", on_failure=None)()
    assert any("the embedder could not start" in r.getMessage() for r in caplog.records)


async def test_a_start_that_completes_ends_nothing() -> None:
    exits: list[int] = []
    done: list[bool] = []

    async def serve() -> None:
        await asyncio.sleep(0)
        done.append(True)

    await start_or_exit(serve, service="embedder", on_failure=exits.append)()
    assert done == [True] and exits == []


async def test_a_slow_start_says_where_it_waits(caplog: pytest.LogCaptureFixture) -> None:
    release = asyncio.Event()

    async def wait_for_the_consistency_check() -> None:
        await release.wait()

    async def serve() -> None:
        await wait_for_the_consistency_check()

    hook = asyncio.create_task(start_or_exit(serve, service="indexer", report_every_s=0.02,
                                             on_failure=None)())
    with caplog.at_level(logging.WARNING):
        async with asyncio.timeout(5):
            while not any("still starting" in r.getMessage() for r in caplog.records):
                await asyncio.sleep(0.01)
        release.set()
        await asyncio.wait_for(hook, 5)
    message = next(r.getMessage() for r in caplog.records if "still starting" in r.getMessage())
    assert message.startswith("the indexer is still starting after 0 s; it waits at:")
    # the whole await chain, down to the step it waits in
    assert "in serve" in message and "in wait_for_the_consistency_check" in message


async def test_stopped_while_starting_cancels_the_start() -> None:
    entered, cancelled = asyncio.Event(), asyncio.Event()

    async def serve() -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    hook = asyncio.create_task(start_or_exit(serve, service="embedder", on_failure=None)())
    await asyncio.wait_for(entered.wait(), 5)
    hook.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hook
    await asyncio.wait_for(cancelled.wait(), 5)
