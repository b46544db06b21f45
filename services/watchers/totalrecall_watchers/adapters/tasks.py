"""What the streaming watchers share: their readers (a follower per engine, a journal, tails)
run as tasks side by side."""

from __future__ import annotations

import asyncio
import contextlib


async def run_together(jobs: list[asyncio.Task[None]]) -> None:
    """Waits until every job ended or one failed; a failure is re-raised (the runner retries the
    watcher with backoff) after the other jobs are cancelled and awaited."""
    try:
        done, _ = await asyncio.wait(jobs, return_when=asyncio.FIRST_EXCEPTION)
        for job in done:
            job.result()
    finally:
        for job in jobs:
            job.cancel()
        for job in jobs:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job
