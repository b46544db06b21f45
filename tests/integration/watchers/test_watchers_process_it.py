"""A real CPU hog → `system.process/high_cpu` on the real events stream, then its exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from totalrecall_schema import Topology
from watchers_it_helpers import StreamReader, make_settings, running


async def test_cpu_hog_is_reported_then_its_exit(nats_url: str, topology: Topology,
                                                  tr_home: Path, reader: StreamReader) -> None:
    settings = make_settings(nats_url, topology, tr_home, enable=("process",))
    settings.process.interval_s = 0.5
    settings.process.cpu_percent = 40.0
    async with running(settings) as app:
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            def is_hog(kind: str):
                return lambda e: (e.subcategory == kind and e.metadata.model_extra is not None
                                  and e.metadata.model_extra.get("pid") == hog.pid)

            ev, headers = await reader.wait_for(is_hog("high_cpu"), 30, f"high_cpu of {hog.pid}")
            assert ev.category == "system.process"
            assert f"(PID {hog.pid})" in ev.summary and "% CPU" in ev.summary
            assert "while True: pass" in ev.detail
            assert headers.get("Nats-Msg-Id") == ev.key
        finally:
            hog.kill()
            hog.wait()
        ev, _ = await reader.wait_for(is_hog("exit"), 30, f"exit of {hog.pid}")
        assert f"PID {hog.pid}" in ev.summary

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as client:
            health = (await client.get("/health")).json()
            metrics = (await client.get("/metrics")).text
        assert health["status"] == "ok", health
        assert health["nats"]["connected"] is True
        assert health["watchers"]["process"]["state"] == "running"
        assert health["watchers"]["journal"]["state"] == "disabled"
        assert 'totalrecall_watchers_events_published_total{path="direct"}' in metrics
