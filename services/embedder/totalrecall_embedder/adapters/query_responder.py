"""The query RPC's own thread: an event loop and a NATS connection of its own.

A recall waits on its query embedding, so the query path shares nothing with ingest that could
make it wait: not the service's event loop (busy decoding, publishing and acking batches), not
its NATS connection, not the ingest model context or thread. Requests are answered one at a
time on this thread (the query model serialises them anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import nats

log = logging.getLogger("totalrecall.embedder")


class QueryResponder:
    """Subscribes `subject` on its own connection and answers each request with
    `handle(request bytes) -> reply bytes` (blocking: runs on this thread)."""

    def __init__(self, connect: dict[str, Any], subject: str, handle: Callable[[bytes], bytes], *,
                 name: str = "totalrecall-embedder-query") -> None:
        self.connect, self.subject, self.handle, self.name = connect, subject, handle, name
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._nc: Any = None

    @property
    def connected(self) -> bool:
        return self._nc is not None and bool(self._nc.is_connected)

    def start(self, timeout: float = 30.0) -> None:
        """Returns once the server has our subscription (requests no longer see "no
        responders"); raises when that cannot be done in `timeout` seconds."""
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._run, name="embed-query-rpc", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise TimeoutError(f"the query responder did not subscribe within {timeout:.0f}s")
        if self._error is not None:
            raise RuntimeError(f"the query responder failed to start: {self._error!r}")

    def stop(self, timeout: float = 10.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("the query responder did not stop within %.0fs", timeout)
        self._thread = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to start(); never kills the process
            self._error = exc
            log.exception("the query responder stopped")
        finally:
            self._nc = None
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()

        async def on_request(msg: Any) -> None:
            try:
                reply = self.handle(msg.data)
            except Exception:  # the handler answers errors itself; this is a bug guard
                log.exception("query RPC handler failed")
                return
            if msg.reply:
                await msg.respond(reply)

        nc = await nats.connect(**self.connect, name=self.name, max_reconnect_attempts=-1,
                                reconnect_time_wait=1)
        try:
            await nc.subscribe(self.subject, cb=on_request)
            await nc.flush(timeout=10)
            self._nc = nc
            self._ready.set()
            await self._stop.wait()
        finally:
            with contextlib.suppress(Exception):
                await nc.drain()
