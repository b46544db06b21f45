"""Ending a task for certain at shutdown.

One `Task.cancel()` can be lost on Python 3.11: `asyncio.wait_for` returns (or raises) the
result of a future that completed in the same loop iteration as the cancellation, and the
`CancelledError` is dropped (CPython gh-86296, fixed by 3.12's rewrite of `wait_for`). nats-py's
`request` and `fetch` wait that way, so a loop that meets "no responders" just as it is
cancelled carries on, and a shutdown that awaits it after one cancel waits forever.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("totalrecall.worker")

#: How long a cancelled task has to end before it is cancelled again.
RECANCEL_S = 0.5


async def stop_task(task: asyncio.Task[Any], *, grace_s: float | None = None) -> None:
    """Let `task` end by itself within `grace_s` (None: no grace), then cancel it, again every
    `RECANCEL_S` while it runs on. Returns once it has ended; an exception it ended with is
    logged (which also retrieves it), not raised."""
    if grace_s is not None:
        await asyncio.wait({task}, timeout=grace_s)
        if not task.done():
            log.warning("%s did not end within %.1fs: cancelled", task.get_name(), grace_s)
    cancels = 0
    while not task.done():
        task.cancel()
        cancels += 1
        await asyncio.wait({task}, timeout=RECANCEL_S)
    if cancels > 1:
        log.warning("%s ignored %d cancellation(s) before it ended", task.get_name(),
                    cancels - 1)
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("%s stopped with %r", task.get_name(), exc)
