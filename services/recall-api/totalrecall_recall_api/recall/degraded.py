"""What the recall in progress had to do without, and the wrappers every stage runs in.

A missing component (the embedder, the index, Postgres for one look-up) degrades a recall, it
never fails it: `Stages.guard` turns its failure into an empty answer, counts it, and notes it
for the response's `degraded` list (`collecting`; the tasks a recall starts share the list).
`Stages.timed` records a stage's time (its histogram and the request's Server-Timing).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from totalrecall_schema import Degraded

from ..metrics import Metrics

log = logging.getLogger("totalrecall.recall")
T = TypeVar("T")

_DEGRADED: contextvars.ContextVar[list[Degraded] | None] = contextvars.ContextVar(
    "degraded", default=None)


@contextmanager
def collecting() -> Iterator[list[Degraded]]:
    """What is noted inside, each once per component and reason (the namespaces a request
    reads each add one), in the list yielded once the block ends."""
    found: list[Degraded] = []
    token = _DEGRADED.set(found)
    out: list[Degraded] = []
    try:
        yield out
    finally:
        _DEGRADED.reset(token)
        once: dict[tuple[str, str], Degraded] = {}
        for d in found:
            once.setdefault((d.component, d.reason), d)
        out.extend(once.values())


def note(d: Degraded) -> None:
    found = _DEGRADED.get()
    if found is not None:
        found.append(d)


@dataclass
class Stages:
    metrics: Metrics

    async def timed(self, stage: str, aw: Awaitable[T]) -> T:
        t0 = time.perf_counter()
        try:
            return await aw
        finally:
            self.metrics.stage(stage, time.perf_counter() - t0)

    async def guard(self, component: str, aw: Awaitable[list[T]]) -> list[T]:
        """A missing component degrades recall, it never fails it."""
        try:
            return await aw
        except Exception as exc:
            self.metrics.degraded.labels(component).inc()
            log.warning("recall without %s: %s", component, exc or type(exc).__name__)
            note(Degraded(component=component, reason=(str(exc) or type(exc).__name__)[:300]))
            return []
