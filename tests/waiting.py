"""Waiting on a condition with a deadline (never a bare sleep): shared by the integration tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


async def wait_for(pred: Callable[[], Awaitable[Any]], timeout: float = 15.0,
                   interval: float = 0.05, what: str = "condition") -> Any:
    """Poll `pred` until it returns something truthy (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await pred()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last={last!r})")
