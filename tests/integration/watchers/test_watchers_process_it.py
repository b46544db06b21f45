"""A real CPU hog → `system.process/high_cpu` on the real events stream, then how it ended:
killed by a signal (from the kernel's process connector) or its exit code (from its zombie)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
from totalrecall_schema import Severity, Topology
from totalrecall_watchers.adapters.proc_connector import can_listen
from watchers_it_helpers import StreamReader, make_settings, running


async def test_cpu_hog_is_reported_then_its_sigkill(nats_url: str, topology: Topology,
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
            hog.wait()  # reaped at once: only the kernel's process connector knows how it ended
        ev, _ = await reader.wait_for(
            lambda e: is_hog("crash")(e) or is_hog("exit")(e), 30, f"end of {hog.pid}")
        assert f"PID {hog.pid}" in ev.summary
        if can_listen():
            assert ev.subcategory == "crash" and "killed by SIGKILL" in ev.summary
            assert ev.metadata.model_extra["signal"] == signal.SIGKILL
            assert ev.metadata.model_extra["signal_name"] == "SIGKILL"
            assert ev.severity == Severity.ERROR
        else:
            assert ev.subcategory == "exit" and "exit code: unknown" in ev.detail

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://w") as client:
            health = (await client.get("/health")).json()
            metrics = (await client.get("/metrics")).text
        assert health["status"] == "ok", health
        assert health["nats"]["connected"] is True
        assert health["watchers"]["process"]["state"] == "running"
        assert health["watchers"]["journal"]["state"] == "disabled"
        assert 'totalrecall_watchers_events_published_total{path="direct"}' in metrics


async def test_hog_exit_code_read_from_its_zombie(nats_url: str, topology: Topology,
                                                 tr_home: Path, tmp_path: Path,
                                                 reader: StreamReader) -> None:
    settings = make_settings(nats_url, topology, tr_home, enable=("process",))
    settings.process.interval_s = 0.5
    settings.process.cpu_percent = 40.0
    settings.process.exit_status = False  # no process connector: the zombie is the only witness
    flag = tmp_path / "stop"
    code = f"import os, sys\nwhile not os.path.exists({str(flag)!r}): pass\nsys.exit(3)"
    async with running(settings):
        hog = subprocess.Popen([sys.executable, "-c", code])
        try:
            def is_hog(*kinds: str):
                return lambda e: (e.subcategory in kinds and e.metadata.model_extra is not None
                                  and e.metadata.model_extra.get("pid") == hog.pid)

            await reader.wait_for(is_hog("high_cpu"), 30, f"high_cpu of {hog.pid}")
            flag.touch()  # the hog exits with code 3 and stays a zombie until we reap it
            ev, _ = await reader.wait_for(is_hog("crash", "exit"), 30, f"end of {hog.pid}")
        finally:
            hog.kill()
            hog.wait()
        assert ev.subcategory == "crash" and ev.severity == Severity.ERROR
        assert f"(PID {hog.pid}) exited with code 3 after high CPU use" in ev.summary
        assert ev.metadata.exit_code == 3 and "signal" not in ev.metadata.model_extra
