"""What this machine could free, measured for real (its journal, package caches, pip and npm
caches) → one `system.storage/reclaimable` event on the real events stream, then nothing more
while nothing moves."""

from __future__ import annotations

import os
from pathlib import Path

from totalrecall_schema import Topology
from watchers_it_helpers import StreamReader, make_settings, running, wait_until


async def test_this_machine_reclaimable_space_is_reported_once(
        nats_url: str, topology: Topology, tr_home: Path, reader: StreamReader) -> None:
    settings = make_settings(nats_url, topology, tr_home, enable=("reclaimable",))
    r = settings.reclaimable
    r.interval_s = 0.5
    r.min_total_bytes = 1  # whatever this machine holds
    r.max_files = 50_000
    async with running(settings) as app:
        runner = app.state.runner
        ev, headers = await reader.wait_for(
            lambda e: e.category == "system.storage" and e.subcategory == "reclaimable", 60,
            "system.storage/reclaimable")
        first = runner.status["reclaimable"].last_poll_at or 0.0
        await wait_until(lambda: (runner.status["reclaimable"].last_poll_at or 0) > first + 1.0,
                         60, "more polls")
        events = await reader.events()
    assert headers.get("Nats-Msg-Id") == ev.key and ev.source == "watcher.reclaimable"
    md = ev.metadata.model_extra or {}
    items = md["items"]
    assert items and md["total_bytes"] == sum(i["bytes"] for i in items)
    for i in items:
        assert os.path.isdir(i["path"]) and i["command"]
    assert "could be reclaimed (not deleted)" in ev.summary
    assert sum(1 for e in events if e.subcategory == "reclaimable") == 1
