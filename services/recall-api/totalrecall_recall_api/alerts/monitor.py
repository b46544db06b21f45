"""The alert monitor: runs the rules (core/alerts.py) over the stored events in the background
and keeps each namespace's latest alerts for recalls to show without waiting on Postgres.

Why here: recall-api already reads Postgres and is where every prompt's block is made; the
watchers see one source each and keep no history, and the indexer is the single writer whose
latency nothing should add to. The detection is stateless (a function of the stored events and
the clock), so a restart loses nothing and several API processes agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from totalrecall_schema import Alert

from ..core.alerts import EventRow, Thresholds, detect, sort_alerts
from ..metrics import Metrics
from ..ports import AlertRows
from ..settings import Settings

log = logging.getLogger("totalrecall.recall.alerts")

#: Namespaces recalled lately that the monitor keeps examining (the oldest asked drops out).
MAX_WATCHED_NAMESPACES = 64


def thresholds(settings: Settings) -> Thresholds:
    return Thresholds(disk_full_days=settings.alerts_disk_full_days,
                      unit_failures=settings.alerts_unit_failures,
                      unit_window=timedelta(hours=settings.alerts_unit_window_h),
                      crash_count=settings.alerts_crash_count,
                      crash_window=timedelta(hours=settings.alerts_crash_window_h),
                      idle_days=settings.alerts_idle_days,
                      reclaimable_bytes=settings.alerts_reclaimable_bytes)


def _now() -> datetime:
    return datetime.now(UTC)


class AlertMonitor:
    def __init__(self, rows: AlertRows, settings: Settings, metrics: Metrics,
                 clock: Callable[[], datetime] = _now) -> None:
        self.rows, self.settings, self.metrics, self.clock = rows, settings, metrics, clock
        self.thresholds = thresholds(settings)
        #: namespace → (when examined, every alert found: open and resolved)
        self._found: dict[str, tuple[datetime, list[Alert]]] = {}
        self._watched: OrderedDict[str, None] = OrderedDict(
            (ns, None) for ns in settings.alerts_namespaces)
        self._wake = asyncio.Event()
        self._locks: dict[str, asyncio.Lock] = {}

    async def examine(self, namespace: str) -> tuple[datetime, list[Alert]]:
        """Run every rule over `namespace`'s events now; the result is kept for recalls."""
        lock = self._locks.setdefault(namespace, asyncio.Lock())
        async with lock:
            t0 = time.perf_counter()
            now = self.clock()
            s, t = self.settings, self.thresholds
            limit = s.alerts_max_rows
            crash_since = now - t.crash_window
            since = min(now - t.unit_window, crash_since)
            window, storage, states = await asyncio.gather(
                self.rows.window_rows(namespace, since, crash_since, limit),
                self.rows.storage_rows(namespace, now - timedelta(days=s.alerts_disk_lookback_days),
                                       limit),
                self.rows.unit_states(namespace) if t.idle_days > 0 else _no_rows())
            activity: dict[str, datetime] = {}
            if t.idle_days > 0:
                cutoff = now - timedelta(days=t.idle_days)
                maybe_idle = [u.unit for u in states if u.unit and u.latest <= cutoff
                              and (u.metadata.get("active") == "active" or u.subcategory == "start")]
                activity = await self.rows.last_activity(namespace, maybe_idle, cutoff)
            alerts = detect([*window, *storage], states, activity, now, t)
            self._found[namespace] = (now, alerts)
            self.metrics.alerts_seconds.observe(time.perf_counter() - t0)
            self._count()
            return now, alerts

    def _count(self) -> None:
        per_rule: dict[str, int] = {}
        for _, alerts in self._found.values():
            for a in alerts:
                if a.state == "open":
                    per_rule[a.rule] = per_rule.get(a.rule, 0) + 1
        for rule in ("disk_filling", "unit_failing", "process_crashing", "service_idle",
                     "reclaimable_space"):
            self.metrics.alerts_open.labels(rule).set(per_rule.get(rule, 0))

    def open_alerts(self, namespaces: Sequence[str]) -> list[Alert]:
        """The open alerts last found in `namespaces` (no I/O). A namespace not examined yet is
        watched from now on: the background task examines it at once."""
        out: list[Alert] = []
        for ns in namespaces:
            if ns not in self._watched:
                self._watched[ns] = None
                while len(self._watched) > MAX_WATCHED_NAMESPACES:
                    dropped, _ = self._watched.popitem(last=False)
                    self._found.pop(dropped, None)
                self._wake.set()
            else:
                self._watched.move_to_end(ns)
            found = self._found.get(ns)
            if found is not None:
                out += [a for a in found[1] if a.state == "open"]
        return sort_alerts(out)

    async def run(self) -> None:
        """Examine every watched namespace every `alerts_interval_s`, and a newly watched one at
        once (only it: a burst of new namespaces, e.g. an evaluation, costs one look each, not a
        pass over all). A failed look is logged and retried at the next pass."""
        loop = asyncio.get_running_loop()
        next_pass = loop.time()
        while True:
            self._wake.clear()
            full = loop.time() >= next_pass
            if full:
                next_pass = loop.time() + self.settings.alerts_interval_s
            for ns in [ns for ns in self._watched if full or ns not in self._found]:
                try:
                    await self.examine(ns)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self.metrics.degraded.labels("alerts").inc()
                    log.warning("alerts of namespace %s not examined: %s", ns,
                                exc or type(exc).__name__)
            # Not asyncio.wait_for: on 3.11 a cancel arriving as its timeout fires can be lost,
            # and the lifespan's shutdown then waits on this task forever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, next_pass - loop.time())):
                    await self._wake.wait()


async def _no_rows() -> list[EventRow]:
    return []
