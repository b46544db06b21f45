"""The MCP server as an MCP client sees it: spawned over stdio, tools listed and called.

The recall API is a fake (conftest.py); tests/e2e/test_mcp_stack.py runs the same against the real
stack.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp_fake_api import TOKEN, FakeApi, free_port, serve_fake_api

TOOLS = {"memory_recall", "memory_store", "memory_timeline", "memory_search", "memory_get",
         "memory_forget", "memory_supersede", "memory_alerts"}


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    with serve_fake_api() as api:
        yield api


@asynccontextmanager
async def mcp_session(api_url: str, **env: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "totalrecall_mcp"],
        env={"TOTALRECALL_API": api_url, "TOTALRECALL_API_TOKEN": TOKEN,
             "TOTALRECALL_TIMEOUT": "5",
             # the server spawned must import the code under test (e.g. a worktree's packages)
             **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}, **env})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text_of(result: object) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")  # type: ignore[attr-defined]


async def test_lists_the_openclaw_compatible_tools(fake_api: FakeApi) -> None:
    async with mcp_session(fake_api.url) as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert set(tools) == TOOLS
    recall = tools["memory_recall"].input_schema
    assert recall["required"] == ["query"]
    assert set(recall["properties"]) == {"query", "timeframe", "category", "max_results", "host"}
    assert "7d" in json.dumps(recall["properties"]["timeframe"])
    assert tools["memory_store"].input_schema["required"] == ["summary"]


async def test_store_then_recall_search_timeline_get(fake_api: FakeApi) -> None:
    async with mcp_session(fake_api.url, TOTALRECALL_NAMESPACE="claude-code") as s:
        stored = await s.call_tool("memory_store", {
            "summary": "Postgres fails when docker holds port 5432",
            "detail": "Fix: stop the container", "category": "diagnosis", "tags": ["postgres"]})
        assert not stored.is_error, text_of(stored)
        assert "Stored in long-term memory" in text_of(stored)

        recalled = await s.call_tool("memory_recall", {"query": "postgres port",
                                                       "timeframe": "7d"})
        assert not recalled.is_error
        assert "<system_memory>" in text_of(recalled) and "5432" in text_of(recalled)

        nothing = await s.call_tool("memory_recall", {"query": "bananas"})
        assert text_of(nothing) == "No matching memories."

        found = await s.call_tool("memory_search", {"query": "postgres", "max_results": 3})
        results = json.loads(text_of(found))["results"]
        assert results[0]["snippet"].startswith("Postgres fails")
        assert results[0]["path"].startswith("memory/daily/") and results[0]["score"] == 0.8
        assert json.loads(text_of(await s.call_tool(
            "memory_search", {"query": "postgres", "min_score": 0.9})))["results"] == []

        timeline = await s.call_tool("memory_timeline", {"hours": 2})
        assert "diagnosis | Postgres fails" in text_of(timeline)
        on_host = await s.call_tool("memory_search", {"query": "postgres", "host": "db-01"})
        assert not on_host.is_error, text_of(on_host)

        whole = await s.call_tool("memory_get", {"path": "MEMORY.md"})
        assert text_of(whole).startswith("# MEMORY")
        part = await s.call_tool("memory_get", {"path": "MEMORY.md", "from_line": 2, "lines": 2})
        assert text_of(part) == "line two\nline three"
        missing = await s.call_tool("memory_get", {"path": "memory/daily/1999-01-01.md"})
        assert not missing.is_error and text_of(missing) == ""

    store = fake_api.bodies("/memory/store")[0]
    assert store == {"summary": "Postgres fails when docker holds port 5432",
                     "detail": "Fix: stop the container", "category": "diagnosis",
                     "tags": ["postgres"], "actor": "agent", "source": "mcp",
                     "namespace": "claude-code"}
    # memory_get reads daily logs as this agent's namespace only
    assert {b["namespace"] for b in fake_api.bodies("/memory/file")} == {"claude-code"}
    recall = fake_api.bodies("/memory/recall")[0]
    assert recall == {"query": "postgres port", "maxResults": 6, "timeframe": "7d",
                      "namespace": "claude-code"}
    assert fake_api.bodies("/memory/timeline")[0]["namespace"] == "claude-code"
    assert fake_api.bodies("/memory/recall")[-1]["hosts"] == ["db-01"]
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in fake_api.requests)


async def test_forget_by_the_ids_recall_shows(fake_api: FakeApi) -> None:
    async with mcp_session(fake_api.url, TOTALRECALL_NAMESPACE="claude-code") as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert tools["memory_forget"].input_schema["required"] == ["ids"]
        await s.call_tool("memory_store", {"summary": "The wifi password hint is the cat"})
        found = json.loads(text_of(await s.call_tool("memory_search", {"query": "wifi"})))
        mid = found["results"][0]["id"]
        done = await s.call_tool("memory_forget", {"ids": [mid, "no-such-id"]})
        assert not done.is_error, text_of(done)
        assert text_of(done) == "Forgot 1 memory. Not found (nothing to forget): no-such-id."
        assert text_of(await s.call_tool("memory_recall", {"query": "wifi"})) == \
            "No matching memories."
        bad = await s.call_tool("memory_forget", {"ids": []})
        assert bad.is_error
    assert fake_api.bodies("/memory/forget") == [{"ids": [mid, "no-such-id"],
                                                 "namespace": "claude-code"}]


async def test_errors_reach_the_model_as_tool_errors(fake_api: FakeApi) -> None:
    async with mcp_session(fake_api.url) as s:
        bad = await s.call_tool("memory_recall", {"query": "trigger-422"})
        assert bad.is_error
        assert "(422): timeframe 'forever' is not valid" in text_of(bad)
    async with mcp_session(fake_api.url, TOTALRECALL_API_TOKEN="wrong") as s:
        denied = await s.call_tool("memory_store", {"summary": "x"})
        assert denied.is_error and "401" in text_of(denied) and "bearer token" in text_of(denied)


async def test_recall_api_down_degrades_gracefully() -> None:
    async with mcp_session(f"http://127.0.0.1:{free_port()}") as s:
        tools = {t.name for t in (await s.list_tools()).tools}
        assert tools == TOOLS  # the server starts and lists tools even with the API down
        down = await s.call_tool("memory_recall", {"query": "anything"})
        assert down.is_error and "unreachable" in text_of(down)


async def test_supersede_replaces_a_memory_in_the_agents_namespace(fake_api: FakeApi) -> None:
    async with mcp_session(fake_api.url, TOTALRECALL_NAMESPACE="claude-code") as s:
        stored = await s.call_tool("memory_store", {"summary": "User prefers vim"})
        old_id = text_of(stored).split("id ")[1].split(".")[0]
        out = await s.call_tool("memory_supersede", {"old_id": old_id,
                                                     "summary": "User now prefers neovim"})
        assert not out.is_error and f"memory {old_id} is superseded" in text_of(out)
        missing = await s.call_tool("memory_supersede", {"old_id": "nope", "summary": "x"})
        assert missing.is_error and "no memory 'nope'" in text_of(missing)
    assert fake_api.bodies("/memory/supersede")[0] == {
        "old_id": old_id, "namespace": "claude-code",
        "new": {"summary": "User now prefers neovim", "actor": "agent", "source": "mcp",
                "namespace": "claude-code"}}
