"""A worker whose start fails after its HTTP is up ends with exit 70, under the real uvicorn,
FastStream and nats-server; without `start_or_exit` it lives on, /health stuck at 503."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from totalrecall.infra import free_port
from totalrecall.infra.process import spawn
from waiting import wait_for_sync

WORKER = textwrap.dedent("""
    import asyncio, logging, sys
    import uvicorn
    from faststream.asgi import AsgiFastStream, get
    from faststream.nats import NatsBroker
    from totalrecall_worker import exit_process, json_response, start_or_exit

    nats_url, port, wrapped = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "wrapped"

    async def serve() -> None:
        await asyncio.sleep(0.5)  # HTTP answers meanwhile, as in the real workers
        raise RuntimeError("the consumer could not be created")

    @get
    async def health(scope):
        return json_response({"status": "starting"}, 503)

    hook = start_or_exit(serve, service="test worker", on_failure=exit_process) if wrapped else serve
    app = AsgiFastStream(NatsBroker(nats_url), asgi_routes=[("/health", health)],
                         after_startup=[hook])
    logging.basicConfig(level=logging.INFO)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="info")
""")


def _start(tmp_path: Path, nats_url: str, mode: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    script, log = tmp_path / "worker.py", tmp_path / f"{mode}.log"
    script.write_text(WORKER)
    port = free_port()
    return spawn([sys.executable, str(script), nats_url, str(port), mode], log_path=log), port, log


def _health(port: int) -> int | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code
    except httpx.HTTPError:
        return None


@pytest.mark.timeout(120)
def test_a_failed_start_ends_the_process_with_70(tmp_path: Path, nats_url: str) -> None:
    proc, _, log = _start(tmp_path, nats_url, "wrapped")
    try:
        wait_for_sync(lambda: proc.poll() is not None, timeout=60, interval=0.1,
                       what="the worker to end itself", context=log.read_text)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 70, log.read_text()
    text = log.read_text()
    assert "the test worker could not start: exiting (status 70)" in text
    assert "the consumer could not be created" in text


@pytest.mark.timeout(120)
def test_without_it_the_worker_lives_on_at_503(tmp_path: Path, nats_url: str) -> None:
    """What the compose smoke once waited ten minutes on (FastStream runs the after-startup
    hooks behind a serving uvicorn); should FastStream end the process itself one day, this
    fails and `start_or_exit` is a mere log line."""
    proc, port, log = _start(tmp_path, nats_url, "bare")
    try:
        wait_for_sync(lambda: "the consumer could not be created" in log.read_text(),
                       timeout=60, interval=0.1, what="the start to fail", context=log.read_text)
        wait_for_sync(lambda: _health(port) == 503, timeout=10, interval=0.1,
                       what="/health after the failed start", context=log.read_text)
        assert proc.poll() is None, log.read_text()
    finally:
        proc.kill()
        proc.wait(10)
