"""The embedder as a real subprocess (`python -m totalrecall_embedder`), configured through
`TR_EMBEDDER_*` like `totalrecall run` starts it: for kill -9 tests."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from totalrecall.infra import free_port
from totalrecall.infra.process import spawn
from totalrecall_schema import Topology


class EmbedderProcess:
    def __init__(self, *, nats_url: str, home: Path, topology: Topology, log_path: Path,
                 **settings: Any) -> None:
        self.log_path = log_path
        self.env = {
            "TOTALRECALL_HOME": str(home),
            "TR_EMBEDDER_NATS_URL": nats_url,
            "TR_EMBEDDER_SUBJECT_PREFIX": topology.prefix,
            "TR_EMBEDDER_STREAM_PREFIX": topology.stream_prefix,
            "PYTHONUNBUFFERED": "1",
        }
        for name, value in settings.items():
            self.env[f"TR_EMBEDDER_{name.upper()}"] = str(value)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> EmbedderProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.port = free_port()
        env = {**os.environ, **self.env, "TR_EMBEDDER_HTTP_PORT": str(self.port)}
        self.proc = spawn([sys.executable, "-m", "totalrecall_embedder"],
                          log_path=self.log_path, env=env)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def health(self) -> dict[str, Any] | None:
        async with httpx.AsyncClient() as http:
            try:
                r = await http.get(f"http://127.0.0.1:{self.port}/health", timeout=2)
            except httpx.HTTPError:
                return None
            return dict(r.json()) if r.status_code == 200 else None

    async def wait_healthy(self, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive:
                raise AssertionError(f"embedder exited early; log:\n{self.log_tail()}")
            h = await self.health()
            if h is not None:
                return h
            await asyncio.sleep(0.1)
        raise AssertionError(f"embedder not healthy within {timeout}s; log:\n{self.log_tail()}")

    async def metrics(self) -> str:
        async with httpx.AsyncClient() as http:
            r = await http.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5)
            return r.text

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"no clean shutdown within {timeout}s") from None

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"
