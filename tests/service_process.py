"""A service as a real subprocess (`python -m <package>`), configured through its `TR_<SERVICE>_*`
variables as `totalrecall run` starts it: for kill -9 tests and the CLI against a running service."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Self

import httpx
from totalrecall.infra import free_port
from totalrecall.infra.process import spawn
from waiting import wait_for


class ServiceProcess:
    def __init__(self, *, name: str, module: str, env_prefix: str, log_path: Path,
                 env: dict[str, str], settings: dict[str, Any]) -> None:
        self.name, self.module, self.env_prefix = name, module, env_prefix
        self.log_path = log_path
        self.env = {**env, "PYTHONUNBUFFERED": "1"}
        self.env.update(self._vars(settings))
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.starts = 0

    def _vars(self, settings: dict[str, Any]) -> dict[str, str]:
        return {f"{self.env_prefix}{name.upper()}": str(value) for name, value in settings.items()}

    def start(self, **override: Any) -> Self:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.port = free_port()
        env = {**os.environ, **self.env, f"{self.env_prefix}HTTP_PORT": str(self.port),
               **self._vars(override)}
        self.proc = spawn([sys.executable, "-m", self.module], log_path=self.log_path, env=env)
        self.starts += 1
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
        async def answered() -> dict[str, Any] | None:
            if not self.alive:
                raise AssertionError(f"{self.name} exited early; log:\n{self.log_tail()}")
            return await self.health()

        return await wait_for(answered, timeout=timeout, interval=0.1,
                              what=f"{self.name} to answer /health",
                              context=lambda: f"log:\n{self.log_tail()}")

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
