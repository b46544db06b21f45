"""The Total Recall MCP server: memory tools for any MCP client (Claude Code, Cursor, …) over stdio.

Tools (names as in OpenClaw, so prompts and skills written for one work with the other):
``memory_recall``, ``memory_store``, ``memory_timeline``, ``memory_search``, ``memory_get``,
``memory_forget``; and ``memory_alerts`` (the proactive alerts: a disk filling, a unit failing again
and again, …).

Configuration (environment, or the command-line flags of the same meaning):
``TOTALRECALL_API`` (default ``http://127.0.0.1:8765``), ``TOTALRECALL_API_TOKEN``,
``TOTALRECALL_NAMESPACE`` (one namespace per agent; default ``default``),
``TOTALRECALL_TIMEOUT`` (seconds, default 10).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from totalrecall_client import (
    AsyncTotalRecallClient,
    Memory,
    TotalRecallConnectionError,
    TotalRecallError,
    TotalRecallHTTPError,
)
from totalrecall_schema.host import hostname_of

log = logging.getLogger("totalrecall_mcp")

INSTRUCTIONS = """\
Total Recall is this machine's long-term memory: system events (processes, services, packages,
config, errors, …), past diagnoses, user preferences and anything stored explicitly.
- Before diagnosing or answering about past events, call memory_recall with a natural-language
  query.
- When you learn something worth keeping (a root cause, a fix, a preference, a decision), call
  memory_store with a one-line summary and optional detail.
- memory_timeline lists what happened in the last N hours; memory_search returns ranked snippets
  with ids and file paths; memory_get reads a memory Markdown file
  (e.g. memory/daily/YYYY-MM-DD.md).
- memory_forget removes memories for good by the ids recall/search show (when the user asks to
  forget something, or a stored memory is wrong).
- memory_alerts lists what needs attention on the machine (a filesystem filling, a service or
  timer failing repeatedly, a process crashing repeatedly, a service idle for weeks): mention
  the open ones to the user early.
"""

TimeframeArg = Literal["auto", "1h", "24h", "7d", "30d", "90d", "all"]
ClientFactory = Callable[[], AsyncTotalRecallClient]


def _when(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def format_memory(m: Memory, *, with_detail: bool = True) -> str:
    head = f"[{m.relative_time or _when(m.timestamp)} | {m.category}"
    if m.severity and m.severity != "info":
        head += f" | severity:{m.severity}"
    head += f" | id:{m.id}]"
    lines = [head, m.summary]
    if with_detail and m.detail:
        lines.append(m.detail)
    return "\n".join(lines)


def daily_path(m: Memory) -> str:
    """The Markdown daily log holding a memory (one file per UTC day)."""
    return f"memory/daily/{m.timestamp.astimezone(UTC).date().isoformat()}.md"


def _tool_error(exc: TotalRecallError) -> ToolError:
    if isinstance(exc, TotalRecallHTTPError):
        return ToolError(f"Total Recall rejected the request ({exc.status_code}): {exc.reason}")
    if isinstance(exc, TotalRecallConnectionError):
        return ToolError(f"Total Recall is unreachable: {exc}. Memory is unavailable right now; "
                         "carry on without it.")
    return ToolError(f"Total Recall error: {exc}")


def build_server(client_factory: ClientFactory | None = None) -> MCPServer[Any]:
    """The MCP server; `client_factory` makes the API client (lazily, inside the event loop)."""
    factory = client_factory or AsyncTotalRecallClient.from_env
    state: dict[str, AsyncTotalRecallClient] = {}

    def client() -> AsyncTotalRecallClient:
        if "c" not in state:
            state["c"] = factory()
        return state["c"]

    server: MCPServer[Any] = MCPServer(name="totalrecall", version="0.1.0",
                                       instructions=INSTRUCTIONS)
    # Registered in this order: MCP clients list the tools as the server does.
    _add_remember_tools(server, client)
    _add_browse_tools(server, client)
    _add_upkeep_tools(server, client)
    return server


def _add_remember_tools(server: MCPServer[Any], client: ClientFactory) -> None:
    """memory_recall, memory_store, memory_supersede."""
    @server.tool(name="memory_recall", structured_output=False, description=(
        "Search long-term memory (system events, diagnoses, errors, preferences, stored notes) "
        "for context relevant to a query. Returns a <system_memory> block, newest and most "
        "relevant first, with relative times."))
    async def memory_recall(
        query: Annotated[str, Field(description="What to look for, in natural language")],
        timeframe: Annotated[TimeframeArg, Field(
            description="How far back: auto (hot tier first, escalates), 1h … 90d, all")] = "auto",
        category: Annotated[str | None, Field(
            description="Optional filter: conversation, diagnosis, error, file, system.service, "
                        "system.process, user_pattern, …")] = None,
        max_results: Annotated[int, Field(ge=1, le=50)] = 6,
        host: Annotated[str | None, Field(
            description="Optional: only memories of events on this machine (its hostname)")] = None,
    ) -> str:
        try:
            res = await client().recall(query, max_results=max_results, timeframe=timeframe,
                                        category=category, hosts=[host] if host else None)
        except TotalRecallError as exc:
            raise _tool_error(exc) from exc
        if not res.memories and not res.alerts:
            return "No matching memories."
        return res.system_memory or "\n\n".join(format_memory(m) for m in res.memories)

    @server.tool(name="memory_store", structured_output=False, description=(
        "Store something important in long-term memory: a root cause, a fix, a decision, a user "
        "preference. Keep the summary to one line; put specifics in detail."))
    async def memory_store(
        summary: Annotated[str, Field(min_length=1, max_length=2000,
                                      description="One line: what to remember")],
        detail: Annotated[str, Field(max_length=32000, description="Specifics")] = "",
        category: Annotated[str | None, Field(
            description="e.g. diagnosis, user_pattern, conversation, system.config")] = None,
        tags: Annotated[list[str] | None, Field(description="Free-form tags")] = None,
    ) -> str:
        try:
            res = await client().store(summary, detail or None, category=category, tags=tags,
                                       actor="agent", source="mcp")
        except TotalRecallError as exc:
            raise _tool_error(exc) from exc
        ids = ", ".join(res.ids)
        dup = " (already stored)" if res.duplicates else ""
        return f"Stored in long-term memory{dup}: id {ids}. It is recallable within seconds."

    @server.tool(name="memory_supersede", structured_output=False, description=(
        "Replace a memory that is no longer true (a changed preference, a moved port) by a new "
        "one. The old memory (its id from memory_search) stays as history but is no longer "
        "recalled unless history is asked for."))
    async def memory_supersede(
        old_id: Annotated[str, Field(min_length=1, description="id of the outdated memory")],
        summary: Annotated[str, Field(min_length=1, max_length=2000,
                                      description="One line: what is true now")],
        detail: Annotated[str, Field(max_length=32000, description="Specifics")] = "",
    ) -> str:
        new: dict[str, Any] = {"summary": summary, "actor": "agent", "source": "mcp"}
        if detail:
            new["detail"] = detail
        try:
            res = await client().supersede(old_id, new)
        except TotalRecallError as exc:
            raise _tool_error(exc) from exc
        return f"Stored {', '.join(res.ids)}; memory {old_id} is superseded."


def _add_browse_tools(server: MCPServer[Any], client: ClientFactory) -> None:
    """memory_timeline, memory_search, memory_get."""
    @server.tool(name="memory_timeline", structured_output=False, description=(
        "What happened in the last N hours, oldest first (optionally one category)."))
    async def memory_timeline(
        hours: Annotated[float, Field(gt=0, le=24 * 365, description="Look-back window")] = 24,
        category: Annotated[str | None, Field(description="Optional category filter")] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> str:
        try:
            res = await client().timeline(hours, category=category, limit=limit)
        except TotalRecallError as exc:
            raise _tool_error(exc) from exc
        if not res.memories:
            return f"Nothing recorded in the last {hours:g} hours."
        return "\n".join(f"{_when(m.timestamp)} | {m.category} | {m.summary}"
                         for m in res.memories)

    @server.tool(name="memory_search", structured_output=False, description=(
        "Ranked search over memory returning JSON snippets with id, score, category, timestamp "
        "and the Markdown file (path) that holds each memory, for follow-up with memory_get."))
    async def memory_search(
        query: Annotated[str, Field(description="Search query")],
        max_results: Annotated[int, Field(ge=1, le=50)] = 6,
        min_score: Annotated[float | None, Field(description="Drop hits scoring below")] = None,
        timeframe: TimeframeArg = "all",
        category: str | None = None,
        host: Annotated[str | None, Field(
            description="Optional: only memories of events on this machine (its hostname)")] = None,
    ) -> str:
        try:
            res = await client().recall(query, max_results=max_results, timeframe=timeframe,
                                        category=category, hosts=[host] if host else None)
        except TotalRecallError as exc:
            raise _tool_error(exc) from exc
        results = [{
            "id": m.id, "score": round(m.score, 4), "category": m.category,
            "timestamp": m.timestamp.isoformat(), "tier": m.tier, "path": daily_path(m),
            "host": hostname_of(m.metadata),
            "snippet": (m.summary + ("\n" + m.detail if m.detail else ""))[:700],
        } for m in res.memories if min_score is None or m.score >= min_score]
        return json.dumps({"results": results}, ensure_ascii=False)

    @server.tool(name="memory_get", structured_output=False, description=(
        "Read a memory Markdown file: MEMORY.md or memory/daily/YYYY-MM-DD.md (optionally a line "
        "range). A daily log shows only this agent's namespace (other lines are empty). A missing "
        "file returns empty text."))
    async def memory_get(
        path: Annotated[str, Field(description="Path relative to the memory root")],
        from_line: Annotated[int | None, Field(ge=1, description="First line (1-based)")] = None,
        lines: Annotated[int | None, Field(ge=1, description="Number of lines")] = None,
    ) -> str:
        try:
            res = await client().file(path)
        except TotalRecallError as exc:
            raise _tool_error(exc) from exc
        text = res.text
        if from_line is not None or lines is not None:
            all_lines = text.splitlines()
            start = (from_line or 1) - 1
            end = start + lines if lines is not None else len(all_lines)
            text = "\n".join(all_lines[start:end])
        return text


def _add_upkeep_tools(server: MCPServer[Any], client: ClientFactory) -> None:
    """memory_forget, memory_alerts."""
    @server.tool(name="memory_forget", structured_output=False, description=(
        "Forget memories for good, by the ids memory_recall / memory_search show (id:...): "
        "they are removed from every index and from the Markdown logs, and never come back. "
        "Use when the user asks to forget something or a stored memory is wrong."))
    async def memory_forget(
        ids: Annotated[list[str], Field(min_length=1, max_length=1000,
                                        description="Ids of the memories to forget")],
    ) -> str:
        try:
            res = await client().forget(ids)
        except TotalRecallError as exc:
            raise _tool_error(exc) from exc
        except ValueError as exc:  # an id that cannot be one (validated before sending)
            raise ToolError(f"not a memory id: {exc}") from exc
        text = f"Forgot {res.forgotten} memor{'y' if res.forgotten == 1 else 'ies'}."
        if res.missing:
            text += f" Not found (nothing to forget): {', '.join(res.missing)}."
        return text

    @server.tool(name="memory_alerts", structured_output=False, description=(
        "What needs attention on this machine, found in its events: a filesystem filling up, a "
        "service or timer failing again and again, a process crashing repeatedly, a service "
        "running unused for weeks. One line per alert, most severe first."))
    async def memory_alerts(
        state: Annotated[Literal["open", "all"], Field(
            description="open (default), or all to include the resolved ones")] = "open",
    ) -> str:
        try:
            res = await client().alerts(state=state)
        except TotalRecallError as exc:
            raise _tool_error(exc) from exc
        if not res.alerts:
            return "No open alerts." if state == "open" else "No alerts."
        return "\n".join(
            f"[{a.severity}{'' if a.state == 'open' else ', ' + a.state}] {a.text} "
            f"({a.rule}, {a.count}x, first {_when(a.first_seen)}, last {_when(a.last_seen)}; "
            f"id:{a.id}; evidence: {', '.join(a.evidence)})" for a in res.alerts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m totalrecall_mcp", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", help="recall API base URL (env TOTALRECALL_API)")
    parser.add_argument("--token", help="bearer token (env TOTALRECALL_API_TOKEN)")
    parser.add_argument("--namespace", help="memory namespace (env TOTALRECALL_NAMESPACE)")
    parser.add_argument("--timeout", type=float, help="seconds (env TOTALRECALL_TIMEOUT)")
    args = parser.parse_args(argv)
    # stdout is the MCP channel: logs go to stderr only.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s totalrecall-mcp %(levelname)s %(message)s")
    overrides = {k: v for k, v in {"base_url": args.api, "token": args.token,
                                   "namespace": args.namespace,
                                   "timeout": args.timeout}.items() if v is not None}
    build_server(lambda: AsyncTotalRecallClient.from_env(**overrides)).run("stdio")
