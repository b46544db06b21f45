"""Start the whole stack as `make run` does (`totalrecall run` on free ports) from Python.

Used by the end-to-end tests, `make bench` and `make eval`, so they measure the real thing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .infra import free_ports
from .paths import default_model_path

PORT_NAMES = ("nats", "nats_monitor", "postgres", "api", "embedder", "indexer", "watchers")


@dataclass
class RunningStack:
    home: Path
    ports: dict[str, int]
    proc: subprocess.Popen[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.ports['api']}"

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.ports['nats']}"

    @property
    def pg_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports['postgres']}/totalrecall"


@contextmanager
def launched_stack(home: Path, *, extra_env: dict[str, str] | None = None,
                   ready_timeout: float = 300.0,
                   unset: Collection[str] = ()) -> Iterator[RunningStack]:
    """`totalrecall run` in `home` on free ports; stopped with SIGINT (Ctrl-C) on exit.
    `unset`: variables the stack does not inherit (e.g. TR_EMBEDDER_MODEL_PATH, to start it
    exactly as a user's `make run` in a new home does)."""
    home.mkdir(parents=True, exist_ok=True)
    ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
    # The model lives in the caller's home (built once by `make bootstrap`), not the new one.
    env = {**os.environ, "TR_EMBEDDER_MODEL_PATH": os.environ.get(
        "TR_EMBEDDER_MODEL_PATH", str(default_model_path())),
        "TOTALRECALL_HOME": str(home), **(extra_env or {})}
    env.update({f"TOTALRECALL_{k.upper()}_PORT": str(v) for k, v in ports.items()})
    for name in unset:
        env.pop(name, None)
    log = home / "supervisor.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "totalrecall"), "run"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    stack = RunningStack(home, ports, proc, log, env)
    try:
        deadline = time.monotonic() + ready_timeout
        while "Total Recall is up" not in log.read_text():
            if proc.poll() is not None:
                raise RuntimeError(f"`totalrecall run` exited early:\n{log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"stack not up in {ready_timeout:.0f}s:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield stack
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
