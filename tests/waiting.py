"""Waiting on a condition with a deadline (never a bare sleep): the one polling helper of the tests.

`wait_for` (async) and `wait_for_sync` (plain code, threads, the e2e stack) poll a predicate
until it returns something truthy, which they return, and fail with the same message when the
deadline passes: what was waited for, the last value seen and, when given, `context()` (the
events seen, a log tail) evaluated at that moment.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def timed_out(timeout: float, what: str, last: object,
              context: Callable[[], str] | None = None) -> AssertionError:
    """The failure of a wait: one format for every helper."""
    extra = f"; {context()}" if context is not None else ""
    return AssertionError(f"timed out after {timeout:g}s waiting for {what} (last={last!r}){extra}")


async def wait_for(pred: Callable[[], Awaitable[T] | T], timeout: float = 15.0,
                   interval: float = 0.05, what: str = "condition",
                   context: Callable[[], str] | None = None) -> T:
    """Poll `pred` (a coroutine function or a plain one) until it returns something truthy
    (returned) or the deadline passes (AssertionError)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = pred()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            raise timed_out(timeout, what, last, context)
        await asyncio.sleep(interval)


def wait_for_sync(pred: Callable[[], T], timeout: float = 15.0, interval: float = 0.05,
                  what: str = "condition", context: Callable[[], str] | None = None) -> T:
    """`wait_for` for code without an event loop: the same polling, the same failure."""
    deadline = time.monotonic() + timeout
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise timed_out(timeout, what, last, context)
        time.sleep(interval)


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
