"""The indexer as a real subprocess (`python -m totalrecall_indexer`), as `totalrecall run` starts
it: for kill -9 tests and for the CLI against a running stack."""

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


class IndexerProcess:
    def __init__(self, *, nats_url: str, pg_dsn: str, home: Path, topology: Topology,
                 log_path: Path, **settings: Any) -> None:
        self.home = home
        self.log_path = log_path
        self.env = {
            "TOTALRECALL_HOME": str(home),
            "TR_INDEXER_NATS_URL": nats_url,
            "TR_INDEXER_PG_DSN": pg_dsn,
            "TR_INDEXER_SUBJECT_PREFIX": topology.prefix,
            "TR_INDEXER_STREAM_PREFIX": topology.stream_prefix,
            "PYTHONUNBUFFERED": "1",
        }
        for name, value in settings.items():
            self.env[f"TR_INDEXER_{name.upper()}"] = str(value)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.starts = 0

    def start(self, **override: Any) -> IndexerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.port = free_port()
        env = {**os.environ, **self.env, "TR_INDEXER_HTTP_PORT": str(self.port)}
        for name, value in override.items():
            env[f"TR_INDEXER_{name.upper()}"] = str(value)
        self.proc = spawn([sys.executable, "-m", "totalrecall_indexer"], log_path=self.log_path,
                          env=env)
        self.starts += 1
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def wait_healthy(self, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient() as http:
            while time.monotonic() < deadline:
                if not self.alive:
                    raise AssertionError(f"indexer exited early; log:\n{self.log_tail()}")
                try:
                    r = await http.get(f"http://127.0.0.1:{self.port}/health", timeout=2)
                    if r.status_code == 200:
                        return dict(r.json())
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise AssertionError(f"indexer not healthy within {timeout}s; log:\n{self.log_tail()}")

    async def metrics(self) -> str:
        async with httpx.AsyncClient() as http:
            r = await http.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5)
            return r.text

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (a clean shutdown); returns the exit code."""
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

    def log_count(self, needle: str) -> int:
        try:
            return self.log_path.read_text(errors="replace").count(needle)
        except OSError:
            return 0
