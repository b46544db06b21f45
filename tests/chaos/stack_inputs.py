"""The stack as `make run` starts it, for the input, security and load rows of `make chaos`.

Each row starts its own stack (own home, own free ports) so one row's damage cannot hide in
another's figures. The watchers get real sources the rows can feed: an application log the
journal watcher tails and a directory the filesystem watcher watches.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from totalrecall.launcher import RunningStack, launched_stack

from tests.waiting import wait_for_sync


@dataclass
class Stack:
    running: RunningStack
    token: str | None
    app_log: Path
    watched_dir: Path

    @property
    def home(self) -> Path:
        return self.running.home

    @property
    def url(self) -> str:
        return self.running.api

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def post(self, path: str, body: Any, timeout: float = 30) -> httpx.Response:
        return httpx.post(self.url + path, json=body, headers=self.headers, timeout=timeout)

    def recall(self, query: str, **kw: Any) -> dict[str, Any]:
        r = self.post("/memory/recall", {"query": query, "timeframe": "all", "maxResults": 10,
                                         **kw})
        r.raise_for_status()
        return dict(r.json())

    def wait_recallable(self, query: str, marker: str, timeout: float = 90, **kw: Any
                        ) -> dict[str, Any]:
        def hit() -> dict[str, Any] | None:
            return next((m for m in self.recall(query, **kw)["memories"]
                         if marker in m["summary"] + m.get("detail", "")), None)
        found = wait_for_sync(hit, timeout, what=f"{marker!r} to be recallable", interval=0.5)
        assert found is not None  # wait_for_sync returns a truthy value or raises
        return found

    def supervisor_restarts(self) -> int:
        """Services the supervisor had to restart (it logs each crash)."""
        return len(re.findall(r"exited .*restarting", self.running.log.read_text()))

    def health(self) -> dict[str, int]:
        """HTTP status of each service's health endpoint."""
        codes: dict[str, int] = {}
        for name in ("api", "embedder", "indexer", "watchers"):
            path = "/memory/health" if name == "api" else "/health"
            try:
                codes[name] = httpx.get(f"http://127.0.0.1:{self.running.ports[name]}{path}",
                                        headers=self.headers, timeout=5).status_code
            except httpx.HTTPError:
                codes[name] = 0
        return codes


@contextmanager
def chaos_stack(home: Path, *, token: str | None = None,
                extra_env: dict[str, str] | None = None) -> Iterator[Stack]:
    """`totalrecall run` in `home` on free ports, its watchers fed from files beside the home."""
    side = home.parent / f"{home.name}-sources"
    side.mkdir(parents=True, exist_ok=True)
    app_log, watched = side / "app.log", side / "watched"
    app_log.touch()
    watched.mkdir(exist_ok=True)
    env = {
        "TR_WATCHERS_RATE_LIMIT__PER_WATCHER_BURST": "1000",
        "TR_WATCHERS_RATE_LIMIT__GLOBAL_BURST": "1000",
        "TR_WATCHERS_JOURNAL__LOG_FILES": json.dumps([str(app_log)]),
        "TR_WATCHERS_FILESYSTEM__PATHS": json.dumps([str(watched)]),
        "TR_WATCHERS_FILESYSTEM__DEBOUNCE_MS": "100",
        **(extra_env or {}),
    }
    if token:
        env["TR_RECALL_API_TOKEN"] = token
        env["TOTALRECALL_API_TOKEN"] = token
    with launched_stack(home, extra_env=env, ready_timeout=300) as running:
        yield Stack(running, token, app_log, watched)


REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "integrations" / "openclaw"


def run_plugin(stack: Stack, job: dict[str, Any]) -> dict[str, Any]:
    """The OpenClaw plugin (built as `make test-plugin` builds it) driven against `stack`: see
    openclaw_plugin_driver.mjs for the job's shape."""
    dist = PLUGIN_DIR / "dist" / "index.js"
    if not dist.exists():
        for cmd in (["npm", "ci", "--no-audit", "--no-fund"], ["npm", "run", "build"]):
            subprocess.run(cmd, cwd=PLUGIN_DIR, check=True, capture_output=True, timeout=600)
    config = {"apiUrl": stack.url, "apiToken": stack.token or "", "recallTimeoutMs": 10_000,
              "timeoutMs": 30_000, **job.pop("config", {})}
    done = subprocess.run(["node", str(Path(__file__).parent / "openclaw_plugin_driver.mjs"),
                           str(dist)], input=json.dumps({**job, "config": config}),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


async def run_mcp(stack: Stack, namespace: str,
                  calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, str]]:
    """Tool calls through the MCP server (`python -m totalrecall_mcp` over stdio): (is_error,
    text) of each."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "totalrecall_mcp"],
        env={**os.environ, "TOTALRECALL_API": stack.url,
             "TOTALRECALL_API_TOKEN": stack.token or "", "TOTALRECALL_NAMESPACE": namespace,
             "TOTALRECALL_TIMEOUT": "30"})
    out: list[tuple[bool, str]] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, args in calls:
            result = await session.call_tool(name, args)
            text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            out.append((bool(result.is_error), text))
    return out
