"""Publish `MemoryEvent`s to JetStream (awaiting the PubAck); spool them when NATS is away.

Order is kept: while the spool holds anything, new events go behind it and the drain task
sends them in arrival order once NATS is back. Every message is published by the schema's
`publish_event` (its subject, and `Nats-Msg-Id: event.key`, so that an event that was both
delivered late and spooled is stored once: JetStream's dedup window).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from pathlib import Path
from typing import Any, Protocol

import nats
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from totalrecall_schema import MemoryEvent, Topology, ensure_streams
from totalrecall_schema.nats_url import connect_options
from totalrecall_schema.publish import event_subject, publish_event

from ..metrics import Metrics
from .spool import Spool

log = logging.getLogger(__name__)


def loggable_url(url: str) -> str:
    """A NATS URL (or comma-separated list) without its user:password@ (compose puts the
    credentials in the URL, and the container's log is no place for them)."""
    return re.sub(r"//[^/@,]*@", "//", url)


class Publisher(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def publish(self, event: MemoryEvent) -> str:
        """'published' or 'spooled'."""
        ...

    def health(self) -> dict[str, Any]: ...


class RecordingPublisher:
    """A fake publisher for tests: keeps every event in memory."""

    def __init__(self) -> None:
        self.events: list[MemoryEvent] = []
        self.started = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.started = False

    async def publish(self, event: MemoryEvent) -> str:
        self.events.append(event)
        return "published"

    def health(self) -> dict[str, Any]:
        return {"connected": True, "fake": True, "published": len(self.events)}


class NatsPublisher:
    def __init__(self, *, nats_url: str, topology: Topology, spool: Spool | Path,
                 metrics: Metrics | None = None, publish_timeout_s: float = 5.0,
                 connect_timeout_s: float = 2.0, reconnect_wait_s: float = 1.0,
                 drain_interval_s: float = 5.0, max_spool_events: int = 10_000,
                 max_spool_bytes: int = 64 * 1024 * 1024, as_host: str | None = None) -> None:
        self.nats_url = nats_url
        self.topology = topology
        #: A remote host of a cluster: publish on this host's subjects
        #: (`Topology.host_events_subject`), the only ones its NATS user may publish on, with
        #: replies on its own inbox; the streams are the services' to create (its user may not).
        self.as_host = as_host
        self._spool_arg = spool
        self.spool: Spool | None = spool if isinstance(spool, Spool) else None
        self.metrics = metrics or Metrics()
        self.publish_timeout_s = publish_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.reconnect_wait_s = reconnect_wait_s
        self.drain_interval_s = drain_interval_s
        self._max_events, self._max_bytes = max_spool_events, max_spool_bytes
        self.nc: NATS | None = None
        self.js: JetStreamContext | None = None
        self.last_error: str | None = None
        self.published = 0
        self.drained = 0
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._dropped_seen = 0

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        if self.spool is None:
            assert isinstance(self._spool_arg, Path)
            self.spool = await asyncio.to_thread(Spool, self._spool_arg,
                                                 max_events=self._max_events,
                                                 max_bytes=self._max_bytes)
        self.metrics.spool_events.set(len(self.spool))
        self._stop.clear()
        self._tasks = [asyncio.create_task(self._connect_loop(), name="nats-connect"),
                       asyncio.create_task(self._drain_loop(), name="spool-drain")]

    async def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        if self.nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.nc.close(), 5)
            self.nc = self.js = None
        self.metrics.nats_connected.set(0)

    @property
    def connected(self) -> bool:
        return self.nc is not None and self.js is not None and self.nc.is_connected

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _connect_loop(self) -> None:
        backoff = self.reconnect_wait_s
        while not self._stop.is_set():
            nc: NATS | None = None
            try:
                nc = await nats.connect(
                    **connect_options(self.nats_url), connect_timeout=self.connect_timeout_s,
                    allow_reconnect=True, max_reconnect_attempts=-1,
                    reconnect_time_wait=self.reconnect_wait_s,
                    disconnected_cb=self._on_disconnected, reconnected_cb=self._on_reconnected,
                    error_cb=self._on_error, name="totalrecall-watchers",
                    **({"inbox_prefix": self.topology.host_inbox_prefix(self.as_host)}
                       if self.as_host else {}))
                js = nc.jetstream(timeout=self.publish_timeout_s)
                if not self.as_host:
                    await ensure_streams(js, self.topology)
            except Exception as exc:
                self.last_error = f"connect: {exc!r}"
                log.info("NATS at %s not reachable (%s); spooling, retrying in %.0fs",
                         self.nats_url, exc, backoff)
                if nc is not None:
                    with contextlib.suppress(Exception):
                        await nc.close()
                await self._sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            self.nc, self.js = nc, js
            self.last_error = None
            self.metrics.nats_connected.set(1)
            log.info("connected to NATS at %s", loggable_url(self.nats_url))
            self._wake.set()
            return

    async def _on_disconnected(self) -> None:
        self.metrics.nats_connected.set(0)
        log.warning("disconnected from NATS; spooling")

    async def _on_reconnected(self) -> None:
        self.metrics.nats_connected.set(1)
        log.info("reconnected to NATS; draining the spool")
        self._wake.set()

    async def _on_error(self, exc: Exception) -> None:
        self.last_error = repr(exc)

    # --- publishing --------------------------------------------------------------------------
    async def _send(self, event: MemoryEvent, payload: bytes) -> bool:
        if not self.connected or self.js is None:
            return False
        try:
            await publish_event(self.js, self.topology, event, payload=payload,
                                as_host=self.as_host, timeout=self.publish_timeout_s)
        except Exception as exc:
            self.last_error = f"publish: {exc!r}"
            self.metrics.publish_errors.inc()
            log.warning("publish failed (%s); spooling", exc)
            return False
        self.published += 1
        return True

    def subject(self, category: str) -> str:
        return event_subject(self.topology, category, self.as_host)

    async def publish(self, event: MemoryEvent) -> str:
        payload = event.model_dump_json().encode()
        async with self._lock:
            assert self.spool is not None, "start() first"
            if len(self.spool) == 0 and await self._send(event, payload):
                self.metrics.events_published.labels("direct").inc()
                return "published"
            await asyncio.to_thread(self.spool.append, event.key, payload)
            self.metrics.events_spooled.inc()
            self._sync_spool_metrics()
        self._wake.set()
        return "spooled"

    def _sync_spool_metrics(self) -> None:
        assert self.spool is not None
        self.metrics.spool_events.set(len(self.spool))
        if self.spool.dropped > self._dropped_seen:
            self.metrics.spool_dropped.inc(self.spool.dropped - self._dropped_seen)
            self._dropped_seen = self.spool.dropped

    async def drain_once(self) -> int:
        """Send spooled events in order until the spool is empty or a send fails."""
        sent = 0
        assert self.spool is not None
        while self.connected and len(self.spool) and not self._stop.is_set():
            async with self._lock:
                batch = await asyncio.to_thread(self.spool.peek, 100)
                if not batch:
                    break
                for name, payload in batch:
                    try:
                        event = MemoryEvent.model_validate_json(payload)
                    except ValueError as exc:
                        log.error("dropping unreadable spooled event %s: %s", name, exc)
                        self.spool.corrupt += 1
                        await asyncio.to_thread(self.spool.remove, name)
                        continue
                    if not await self._send(event, event.model_dump_json().encode()):
                        self._sync_spool_metrics()
                        return sent
                    await asyncio.to_thread(self.spool.remove, name)
                    self.metrics.events_published.labels("spool").inc()
                    sent += 1
                    self.drained += 1
                self._sync_spool_metrics()
        if sent:
            log.info("drained %d spooled events", sent)
        return sent

    async def _drain_loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.drain_interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                await self.drain_once()
            except Exception:
                log.exception("spool drain failed")

    def health(self) -> dict[str, Any]:
        sp = self.spool
        return {
            "url": loggable_url(self.nats_url), "connected": self.connected,
            "last_error": self.last_error, "published": self.published,
            "subjects": self.subject("<category>"),
            "spool": {"pending": len(sp) if sp else 0, "bytes": sp.size_bytes if sp else 0,
                      "dropped": sp.dropped if sp else 0, "drained": self.drained,
                      "dir": str(sp.dir) if sp else str(self._spool_arg)},
        }
