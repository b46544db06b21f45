"""Start `totalrecall run` in a temporary TOTALRECALL_HOME on free ports (like tests/e2e), stop it
with SIGINT."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import httpx
import psutil
from totalrecall.infra import free_port, free_ports
from totalrecall.launcher import PORT_NAMES


def default_model_path() -> Path:
    """The GGUF the user's stack uses (resolved *before* TOTALRECALL_HOME points elsewhere)."""
    env = os.environ.get("TR_EMBEDDER_MODEL_PATH")
    if env:
        return Path(env)
    from totalrecall.paths import default_model_path as stack_model

    return stack_model()


def interrupt(proc: subprocess.Popen[str] | subprocess.Popen[bytes], grace_s: float) -> None:
    """Stop `proc` as Ctrl-C would (its services shut down in order), killed after `grace_s`."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class Stack:
    """Context manager: `with Stack() as s: s.api` → the base URL of its recall API."""

    def __init__(self, *, keep_home: bool = False, with_watchers: bool = False,
                 ready_timeout: float = 300.0, log: Callable[[str], None] = print,
                 extra_env: dict[str, str] | None = None) -> None:
        self.keep_home, self.with_watchers = keep_home, with_watchers
        self.extra_env = dict(extra_env or {})  # e.g. what the watchers watch
        self.ready_timeout, self.log = ready_timeout, log
        self.home = Path(tempfile.mkdtemp(prefix="tr-eval-"))
        self.ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
        self.api = f"http://127.0.0.1:{self.ports['api']}"
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = self.home / "supervisor.log"

    def start(self) -> None:
        model = default_model_path()
        if not model.exists():
            raise FileNotFoundError(f"embedding model not found at {model} "
                                    "(run `totalrecall model build` or set TR_EMBEDDER_MODEL_PATH)")
        env = {**os.environ, "TOTALRECALL_HOME": str(self.home),
               "TR_EMBEDDER_MODEL_PATH": str(model)}
        env.update({f"TOTALRECALL_{k.upper()}_PORT": str(v) for k, v in self.ports.items()})
        env.update(self.extra_env)
        exe = Path(sys.executable).parent / "totalrecall"
        cmd = [str(exe) if exe.exists() else sys.executable, "run"]
        if not exe.exists():
            cmd = [sys.executable, "-m", "totalrecall.main", "run"]
        if not self.with_watchers:
            cmd += ["--only", "indexer", "embedder", "recall-api"]
        self._out = open(self.log_path, "w")  # noqa: SIM115
        self.log(f"starting the stack in {self.home} (api {self.api}, log {self.log_path})")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._out, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=False)
        deadline = time.monotonic() + self.ready_timeout
        while True:
            text = self.log_path.read_text(errors="replace")
            if "Total Recall is up" in text:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"the stack exited with {self.proc.returncode}:\n{text[-4000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the stack was not up after {self.ready_timeout:.0f}s:\n"
                                   f"{text[-4000:]}")
            time.sleep(0.5)
        self.log("the stack is up")

    def stop(self) -> None:
        if self.proc is not None:
            interrupt(self.proc, grace_s=90)
        if getattr(self, "_out", None) is not None:
            self._out.close()
        if not self.keep_home:
            shutil.rmtree(self.home, ignore_errors=True)
        else:
            self.log(f"stack state kept in {self.home}")

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def recall_api_env(stack: Stack) -> dict[str, str]:
    """The environment the stack's supervisor gave its recall API (ports, DSN, home)."""
    assert stack.proc is not None
    for p in psutil.Process(stack.proc.pid).children(recursive=True):
        if "totalrecall_recall_api" in " ".join(p.cmdline()):
            return dict(p.environ())
    raise RuntimeError("the stack runs no recall API")


class SecondApi:
    """A recall API process of its own over the stack's services, with `env` on top."""

    def __init__(self, base: dict[str, str], env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "totalrecall_recall_api"],
            env={**base, **env, "TR_RECALL_HTTP_PORT": str(self.port)},
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the second recall API did not start: {log_path}")
            time.sleep(0.5)

    def close(self) -> None:
        interrupt(self.proc, grace_s=30)
        self._log.close()
