"""The MCP server against the real stack: an MCP client session over stdio, tools listed and called.

The stack is launched like tests/e2e/test_stack.py (`totalrecall run` on free ports). Set
``TOTALRECALL_E2E_API`` (and ``TOTALRECALL_E2E_API_TOKEN``) to run against an already running API
instead.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from stacklib import Api, wait_for


def _text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def test_mcp_tools_against_the_real_stack(stack: Api) -> None:
    marker = uuid.uuid4().hex[:8]
    namespace = f"mcp-{marker}"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "totalrecall_mcp"],
        env={"TOTALRECALL_API": stack.url, "TOTALRECALL_API_TOKEN": stack.token or "",
             "TOTALRECALL_NAMESPACE": namespace, "TOTALRECALL_TIMEOUT": "30",
             # the server spawned must import the code under test (e.g. a worktree's packages)
             **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        names = {t.name for t in (await s.list_tools()).tools}
        assert names == {"memory_recall", "memory_store", "memory_timeline", "memory_search",
                         "memory_get", "memory_forget", "memory_supersede",
                         "memory_alerts"}

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

        # What is no longer true is replaced: recall gives the new memory, not the old one.
        replaced = await s.call_tool("memory_supersede", {
            "old_id": hit["id"],
            "summary": f"Postgres now listens on 5433, so docker no longer blocks it ({marker})"})
        assert not replaced.is_error, _text(replaced)
        # And the old one, no longer true, is forgotten for good.
        forgot = await s.call_tool("memory_forget", {"ids": [hit["id"]]})
        assert _text(forgot) == "Forgot 1 memory.", _text(forgot)

        # A namespace without machine events has no alerts (the real endpoint answers).
        quiet = await s.call_tool("memory_alerts", {})
        assert not quiet.is_error and _text(quiet) == "No open alerts."

    def current() -> list[str] | None:
        ids = [m["id"] for m in stack.recall("postgres docker port", namespace=namespace)
               if marker in m["summary"]]
        return ids if ids and hit["id"] not in ids else None
    assert wait_for(current, 60, "the replacing memory alone in recall")

    # Namespace isolation: another namespace does not see it.
    assert not [m for m in stack.recall("postgres port 5432", namespace=f"other-{marker}")
                if marker in m["summary"]]
