"""Thin glue: an event leaving a watcher → rate limit → publisher (JetStream or spool)."""

from __future__ import annotations

import logging

from totalrecall_schema import MemoryEvent

from .adapters.publisher import Publisher
from .core.ratelimit import RateLimiter
from .metrics import Metrics

log = logging.getLogger(__name__)


class EventHandler:
    def __init__(self, publisher: Publisher, limiter: RateLimiter, metrics: Metrics) -> None:
        self.publisher = publisher
        self.limiter = limiter
        self.metrics = metrics

    async def __call__(self, watcher: str, event: MemoryEvent) -> bool:
        allowed, reason = self.limiter.allow(watcher)
        if not allowed:
            self.metrics.events_suppressed.labels(watcher, f"rate_limit_{reason}").inc()
            log.debug("rate limit (%s) suppressed %s: %s", reason, watcher, event.summary)
            return False
        self.metrics.events_emitted.labels(watcher, event.category).inc()
        outcome = await self.publisher.publish(event)
        log.info("%s %s/%s: %s (%s)", watcher, event.category, event.subcategory, event.summary,
                 outcome)
        return True
