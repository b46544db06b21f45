"""The watchers' background loops: every watcher runs as its own task (polling on its interval,
or following its stream); a watcher that fails never takes the service down. Built by
`container.build`, started and stopped by the app's lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from totalrecall_schema import MemoryEvent

from .core.base import Unavailable, Watcher
from .metrics import Metrics

log = logging.getLogger(__name__)

HandleEvent = Callable[[str, MemoryEvent], Awaitable[bool]]


@dataclass
class WatcherStatus:
    state: str = "starting"
    reason: str | None = None
    events: int = 0
    errors: int = 0
    last_poll_at: float | None = None

    def as_dict(self, watcher: Watcher | None) -> dict[str, Any]:
        d: dict[str, Any] = {"state": self.state}
        if self.reason:
            d["reason"] = self.reason
        d["events"] = self.events
        if self.errors:
            d["errors"] = self.errors
        if watcher is not None:
            d["interval_s"] = None if watcher.streaming else watcher.interval_s
            if watcher.note:
                d["note"] = watcher.note
            stats = getattr(watcher, "stats", None)
            if callable(stats):
                d.update(stats())
        return d


class WatcherRunner:
    def __init__(self, watchers: list[Watcher], handle: HandleEvent, metrics: Metrics, *,
                 disabled: list[str] | None = None, max_backoff_s: float = 60.0,
                 recheck_s: float = 60.0) -> None:
        self.watchers = watchers
        self.handle = handle
        self.metrics = metrics
        self.max_backoff_s = max_backoff_s
        #: How often an unavailable watcher's source is looked for again: podman installed,
        #: a log file created or a socket appearing after the service started is then watched
        #: from that moment, without a restart.
        self.recheck_s = recheck_s
        self.status: dict[str, WatcherStatus] = {w.name: WatcherStatus() for w in watchers}
        for name in disabled or []:
            self.status[name] = WatcherStatus(state="disabled")
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def _set(self, name: str, state: str, reason: str | None = None) -> None:
        st = self.status[name]
        st.state, st.reason = state, reason
        self.metrics.set_state(name, state)

    async def start(self) -> None:
        self._stop.clear()
        for name, st in self.status.items():
            self.metrics.set_state(name, st.state)
        self._tasks = [asyncio.create_task(self._run_one(w), name=f"watcher-{w.name}")
                       for w in self.watchers]

    async def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=timeout)
            for t in pending:
                t.cancel()
            for t in pending:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
        self._tasks = []
        for w in self.watchers:  # background resources (threads, sockets) of a watcher
            close = getattr(w, "close", None)
            if callable(close):
                try:
                    await asyncio.to_thread(close)
                except Exception:
                    log.exception("closing watcher %s failed", w.name)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    def _emitter(self, w: Watcher) -> Callable[[MemoryEvent], Awaitable[bool]]:
        async def emit(event: MemoryEvent) -> bool:
            self.status[w.name].events += 1
            try:
                return await self.handle(w.name, event)
            except Exception:
                log.exception("could not hand over an event of %s", w.name)
                return False
        return emit

    async def _until_available(self, w: Watcher) -> bool:
        """Waits until `w`'s source is there, looking again every `recheck_s`; False when the
        runner stops first."""
        said: str | None = None
        while not self._stop.is_set():
            try:
                reason = await asyncio.to_thread(w.check_available)
            except Exception as exc:
                reason = f"availability check failed: {exc!r}"
            if not reason:
                if said is not None:
                    log.info("watcher %s available now", w.name)
                return True
            if reason != said:  # once per reason, not once per look
                log.info("watcher %s unavailable: %s (looking again every %.0fs)", w.name,
                         reason, self.recheck_s)
                said = reason
            self._set(w.name, "unavailable", reason)
            await self._sleep(self.recheck_s)
        return False

    async def _run_one(self, w: Watcher) -> None:
        while await self._until_available(w):
            if not await self._watch(w):
                break
            # Its source went away while watched: give it time before looking again (a source
            # that says "available" and then fails at once would otherwise spin).
            await self._sleep(self.recheck_s)

    async def _watch(self, w: Watcher) -> bool:
        """Runs `w` until the runner stops (False) or its source goes away (True: look again)."""
        self._set(w.name, "running")
        emit = self._emitter(w)
        backoff = 1.0
        while not self._stop.is_set():
            try:
                if w.streaming:
                    await w.run(emit, self._stop)
                    if self._stop.is_set():
                        break
                    raise RuntimeError("stream ended")
                t0 = time.perf_counter()
                events = await asyncio.to_thread(w.poll)
                self.metrics.poll_seconds.labels(w.name).observe(time.perf_counter() - t0)
                self.status[w.name].last_poll_at = time.time()
                for event in events:
                    await emit(event)
                if self.status[w.name].state != "running":
                    self._set(w.name, "running")
                backoff = 1.0
                await self._sleep(w.interval_s)
            except Unavailable as exc:
                log.info("watcher %s unavailable: %s", w.name, exc)
                self._set(w.name, "unavailable", str(exc))
                return True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.status[w.name].errors += 1
                self.metrics.watcher_errors.labels(w.name).inc()
                self._set(w.name, "failed", f"{type(exc).__name__}: {exc}"[:500])
                log.exception("watcher %s failed; retrying in %.0fs", w.name, backoff)
                await self._sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
                if not self._stop.is_set() and w.streaming:
                    self._set(w.name, "running")
        if self.status[w.name].state == "running":
            self._set(w.name, "stopped")
        return False

    def export_stats(self) -> None:
        """Copy the watchers' own counters (dedup, coalescing, filtering) into the metrics."""
        for w in self.watchers:
            stats = getattr(w, "stats", None)
            if callable(stats):
                for k, v in stats().items():
                    self.metrics.watcher_stat.labels(w.name, k).set(v)

    def health(self) -> dict[str, Any]:
        by_name = {w.name: w for w in self.watchers}
        return {name: st.as_dict(by_name.get(name)) for name, st in self.status.items()}
