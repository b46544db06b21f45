"""The MCP server against the real stack: an MCP client session over stdio, tools listed and called.

The stack is launched like tests/e2e/test_stack.py (`totalrecall run` on free ports). Set
``TOTALRECALL_E2E_API`` (and ``TOTALRECALL_E2E_API_TOKEN``) to run against an already running API
instead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, every: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


@dataclass
class Api:
    url: str
    token: str | None = None

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
    from totalrecall.infra import free_port

    ports = {name: free_port() for name in
             ("nats", "nats_monitor", "postgres", "api", "embedder", "indexer", "watchers")}
    env = {**os.environ, "TOTALRECALL_HOME": str(home)}
    if model_path is not None:
        env["TR_EMBEDDER_MODEL_PATH"] = str(model_path)
    env.update({f"TOTALRECALL_{k.upper()}_PORT": str(v) for k, v in ports.items()})
    log = home / "supervisor.log"
    out = open(log, "w")  # noqa: SIM115
    proc = subprocess.Popen([str(Path(sys.executable).parent / "totalrecall"), "run"], env=env,
                            stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: "Total Recall is up" in log.read_text() or proc.poll() is not None,
                 240, "the stack to come up")
        assert proc.poll() is None, log.read_text()
        yield Api(f"http://127.0.0.1:{ports['api']}")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        out.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
          ) -> Iterator[Api]:
    model = None if os.environ.get("TOTALRECALL_E2E_API") else request.getfixturevalue(
        "model_path")
    with launch_stack(tmp_path_factory.mktemp("mcp-e2e-home"), model) as api:
        yield api


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def test_mcp_tools_against_the_real_stack(stack: Api) -> None:
    marker = uuid.uuid4().hex[:8]
    namespace = f"mcp-{marker}"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "totalrecall_mcp"],
        env={"TOTALRECALL_API": stack.url, "TOTALRECALL_API_TOKEN": stack.token or "",
             "TOTALRECALL_NAMESPACE": namespace, "TOTALRECALL_TIMEOUT": "30"})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == {"memory_recall", "memory_store", "memory_timeline", "memory_search",
                         "memory_get"}

        stored = await s.call_tool("memory_store", {
            "summary": f"Postgres fails to start when docker holds port 5432 ({marker})",
            "detail": "Fix: stop the postgres container first.", "category": "diagnosis"})
        assert not stored.is_error, _text(stored)

        # Ingest is asynchronous (NATS → embedder → indexer): poll until it is recallable.
        stack.wait_recallable("postgres port 5432 docker", marker, namespace=namespace)

        recalled = await s.call_tool("memory_recall", {"query": "why does postgres fail to start?",
                                                       "timeframe": "all"})
        assert not recalled.is_error and marker in _text(recalled)
        assert "<system_memory" in _text(recalled)

        found = json.loads(_text(await s.call_tool("memory_search", {"query": "postgres docker"})))
        hit = next(r for r in found["results"] if marker in r["snippet"])
        assert hit["path"].startswith("memory/daily/")

        timeline = await s.call_tool("memory_timeline", {"hours": 1})
        assert marker in _text(timeline)

        daily = await s.call_tool("memory_get", {"path": hit["path"]})
        assert not daily.is_error  # the indexer's Markdown log (may lag the Postgres row)
        missing = await s.call_tool("memory_get", {"path": "memory/daily/1999-01-01.md"})
        assert not missing.is_error and _text(missing) == ""

    # Namespace isolation: another namespace does not see it.
    assert not [m for m in stack.recall("postgres port 5432", namespace=f"other-{marker}")
                if marker in m["summary"]]
