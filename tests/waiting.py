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


async def request_served(nc: Any, subject: str, payload: bytes, timeout: float = 30.0,
                         serve_timeout: float = 10.0) -> Any:
    """`nc.request`, retrying "no responders" for up to `serve_timeout` seconds: a request right
    after a service (re)starts may race its subscription on a loaded machine."""
    from nats.errors import NoRespondersError

    async def ask() -> Any:
        try:
            return await nc.request(subject, payload, timeout=timeout)
        except NoRespondersError:
            return None
    return await wait_for(ask, timeout=serve_timeout, interval=0.1,
                          what=f"a responder on {subject}")
