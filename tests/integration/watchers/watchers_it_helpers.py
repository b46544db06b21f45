"""Helpers of the watchers integration tests: settings, running the app, reading the stream."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import NotFoundError
from totalrecall_schema import MemoryEvent, Topology
from totalrecall_watchers.app import create_app
from totalrecall_watchers.container import WATCHER_NAMES
from totalrecall_watchers.settings import Settings
from waiting import wait_for


def make_settings(nats_url: str, topology: Topology, tr_home: Path, *, enable: tuple[str, ...],
                  **overrides: Any) -> Settings:
    s = Settings(nats_url=nats_url, subject_prefix=topology.prefix,
                 stream_prefix=topology.stream_prefix, **overrides)
    for name in WATCHER_NAMES:
        getattr(s, name).enabled = name in enable
    s.spool.dir = str(tr_home / "spool" / "watchers")
    return s


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Any]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


class StreamReader:
    """Reads the events stream message by message (no consumer state to clean up)."""

    def __init__(self, js: Any, topology: Topology) -> None:
        self.js = js
        self.topology = topology
        self.next_seq = 1
        self.seen: list[tuple[MemoryEvent, dict[str, str]]] = []

    async def _fetch_new(self) -> None:
        try:
            info = await self.js.stream_info(self.topology.events_stream)
        except NotFoundError:
            return
        while self.next_seq <= info.state.last_seq:
            try:
                msg = await self.js.get_msg(self.topology.events_stream, self.next_seq)
            except NotFoundError:
                self.next_seq += 1
                continue
            self.seen.append((MemoryEvent.model_validate_json(msg.data), dict(msg.headers or {})))
            self.next_seq += 1

    async def wait_for(self, pred: Callable[[MemoryEvent], bool], timeout: float,
                       what: str) -> tuple[MemoryEvent, dict[str, str]]:
        async def found() -> tuple[MemoryEvent, dict[str, str]] | None:
            await self._fetch_new()
            return next(((ev, headers) for ev, headers in self.seen if pred(ev)), None)

        return await wait_for(found, timeout=timeout, interval=0.1, what=what,
                              context=lambda: "got " + str(
                                  [f"{e.category}/{e.subcategory}: {e.summary}"
                                   for e, _ in self.seen]))

    async def events(self) -> list[MemoryEvent]:
        await self._fetch_new()
        return [e for e, _ in self.seen]


@pytest.fixture
async def reader(nats_url: str, topology: Topology) -> AsyncIterator[StreamReader]:
    nc = await nats.connect(nats_url)
    try:
        yield StreamReader(nc.jetstream(), topology)
    finally:
        await nc.close()


async def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    await wait_for(pred, timeout=timeout, what=what)


async def watch_started(reader: StreamReader, directory: Path, timeout: float = 20.0) -> Path:
    """Until a filesystem watcher's watch of `directory` is set up (inotify watches, fanotify
    marks: when it starts iterating, after it reports "running"), write probe files into it, a
    new one every 0.1 s, until the stream shows one: returns that probe. No fixed sleep: on a
    loaded machine a setup can take longer than any sleep, on an idle one far less."""
    probes: list[Path] = []

    async def seen() -> Path | None:
        probe = directory / f"watch-probe-{len(probes)}.txt"
        probe.write_text("probe\n")
        probes.append(probe)
        names = {str(p) for p in probes}
        return next((Path(str(e.metadata.path)) for e in await reader.events()
                     if e.category == "file" and e.metadata.path in names), None)

    return await wait_for(seen, timeout=timeout, interval=0.1,
                          what=f"the watch of {directory} to report a probe file")
