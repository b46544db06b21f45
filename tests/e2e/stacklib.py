"""Launching the whole stack as `make run` does (`totalrecall run` on free ports) for e2e tests.

Set ``TOTALRECALL_E2E_API`` (and ``TOTALRECALL_E2E_API_TOKEN``) to run against an already running
API instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
from waiting import wait_for_sync

T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, every: float = 0.5) -> T:
    """`waiting.wait_for_sync` with the e2e tests' argument order and a coarser step (each try
    is an HTTP call to the stack)."""
    return wait_for_sync(fn, timeout=timeout, interval=every, what=what)  # type: ignore[return-value]


@dataclass
class Api:
    url: str
    token: str | None = None
    proc: subprocess.Popen[str] | None = None  # the `totalrecall run` supervisor, when we own it
    ports: dict[str, int] | None = None
    home: Path | None = None
    #: A directory the stack's filesystem watcher watches, and an application log its journal
    #: watcher tails (only when we launched the stack).
    watched_dir: Path | None = None
    app_log: Path | None = None
    #: A directory the stack's storage watcher checks every second (when we launched the stack).
    storage_dir: Path | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def post(self, path: str, body: Any) -> httpx.Response:
        return httpx.post(self.url + path, json=body, headers=self.headers, timeout=30)

    def recall(self, query: str, **kw: Any) -> list[dict[str, Any]]:
        r = self.post("/memory/recall", {"query": query, "timeframe": "all", "maxResults": 10,
                                         **kw})
        r.raise_for_status()
        return list(r.json()["memories"])

    def wait_recallable(self, query: str, marker: str, timeout: float = 60, **kw: Any
                        ) -> dict[str, Any]:
        def hit() -> dict[str, Any] | None:
            return next((m for m in self.recall(query, **kw)
                         if marker in m["summary"] + m.get("detail", "")), None)
        return wait_for(hit, timeout, f"{marker!r} to be recallable")


@contextmanager
def launch_stack(home: Path, model_path: Path | None) -> Iterator[Api]:
    """`totalrecall run` on free ports (as `make run` starts it), or the API named by
    TOTALRECALL_E2E_API. Stopped with Ctrl-C (SIGINT) at the end."""
    external = os.environ.get("TOTALRECALL_E2E_API")
    if external:
        yield Api(external.rstrip("/"), os.environ.get("TOTALRECALL_E2E_API_TOKEN") or None)
        return
    from totalrecall.launcher import launched_stack

    env = {
        # Fast watcher cadence so a CPU hog shows up within seconds.
        "TR_WATCHERS_PROCESS__INTERVAL_S": "1", "TR_WATCHERS_PROCESS__CPU_PERCENT": "40",
        # Other e2e tests (the OpenClaw gateway, builds) start CPU-hungry processes of their own:
        # a production-sized burst budget would be spent before the test's own hog shows up.
        "TR_WATCHERS_RATE_LIMIT__PER_WATCHER_BURST": "1000",
        "TR_WATCHERS_RATE_LIMIT__GLOBAL_BURST": "1000",
        # Learned patterns name hours of the day: in one zone whatever the machine's.
        "TR_RECALL_PATTERNS_TIMEZONE": "UTC"}
    # Real filesystem changes and error log lines for tests/e2e/test_watchers_e2e.py (outside
    # TOTALRECALL_HOME, which the filesystem watcher never reports).
    watched_dir = home.parent / f"{home.name}-watched"
    log_dir = home.parent / f"{home.name}-logs"
    watched_dir.mkdir(exist_ok=True)
    log_dir.mkdir(exist_ok=True)
    env["TR_WATCHERS_FILESYSTEM__PATHS"] = json.dumps([str(watched_dir)])
    env["TR_WATCHERS_FILESYSTEM__DEBOUNCE_MS"] = "100"
    env["TR_WATCHERS_JOURNAL__LOG_FILES"] = json.dumps([str(log_dir / "app.log")])
    # A mount point the storage watcher checks every second: tests/e2e/test_alerts_e2e.py mounts
    # a small tmpfs there and fills it (its alerts come from the watcher's real reports).
    storage_dir = home.parent / f"{home.name}-storage"
    storage_dir.mkdir(exist_ok=True)
    env["TR_WATCHERS_STORAGE__PATHS"] = json.dumps([str(storage_dir)])
    env["TR_WATCHERS_STORAGE__INTERVAL_S"] = "1"
    if model_path is not None:
        env["TR_EMBEDDER_MODEL_PATH"] = str(model_path)
    with launched_stack(home, extra_env=env, ready_timeout=240) as running:
        yield Api(running.api, proc=running.proc, ports=running.ports, home=home,
                  watched_dir=watched_dir, app_log=log_dir / "app.log",
                  storage_dir=storage_dir)


@contextmanager
def api_with_token(stack: Api, token: str) -> Iterator[str]:
    """A second recall-api process on the stack's NATS and Postgres, bound with a bearer token
    (as off loopback); yields its URL."""
    assert stack.ports is not None and stack.home is not None, "needs a stack launched here"
    from totalrecall.infra import free_port

    port = free_port()
    env = {**os.environ, "TOTALRECALL_HOME": str(stack.home), "TR_RECALL_HTTP_PORT": str(port),
           "TR_RECALL_API_TOKEN": token,
           "TR_RECALL_NATS_URL": f"nats://127.0.0.1:{stack.ports['nats']}",
           "TR_RECALL_PG_DSN": f"postgresql://postgres@127.0.0.1:{stack.ports['postgres']}/totalrecall"}
    proc = subprocess.Popen([sys.executable, "-m", "totalrecall_recall_api"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, 60, "the token-protected recall-api")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
