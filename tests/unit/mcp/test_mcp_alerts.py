"""The MCP server's `memory_alerts` tool over stdio, against the fake recall API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp_fake_api import FakeApi, serve_fake_api
from test_mcp_stdio import mcp_session, text_of


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    with serve_fake_api() as api:
        yield api


def _alert(subject: str, state: str, severity: str, text: str) -> dict[str, object]:
    return {"id": f"unit_failing:{subject}", "rule": "unit_failing", "subject": subject,
            "namespace": "ops", "state": state, "severity": severity, "text": text,
            "first_seen": "2026-11-23T03:00:00Z", "last_seen": "2026-11-25T03:00:00Z",
            "count": 3, "evidence": ["ev-1", "ev-2"]}


async def test_memory_alerts_lists_open_then_all(fake_api: FakeApi) -> None:
    async with mcp_session(fake_api.url, TOTALRECALL_NAMESPACE="ops") as s:
        tool = next(t for t in (await s.list_tools()).tools if t.name == "memory_alerts")
        assert set(tool.input_schema["properties"]) == {"state"}
        none = await s.call_tool("memory_alerts", {})
        assert not none.is_error and text_of(none) == "No open alerts."

        fake_api.alerts = [
            _alert("backup.service", "open", "error", "backup.service failed 3 times"),
            _alert("web.service", "resolved", "info", "web.service works again")]
        shown = text_of(await s.call_tool("memory_alerts", {}))
        assert shown == ("[error] backup.service failed 3 times (unit_failing, 3x, first "
                         "2026-11-23 03:00 UTC, last 2026-11-25 03:00 UTC; "
                         "id:unit_failing:backup.service; evidence: ev-1, ev-2)")
        every = text_of(await s.call_tool("memory_alerts", {"state": "all"})).splitlines()
        assert len(every) == 2 and every[1].startswith("[info, resolved] web.service works again")
        bad = await s.call_tool("memory_alerts", {"state": "closed"})
        assert bad.is_error
    asked = [p for p, _, _ in fake_api.requests if p == "/memory/alerts"]
    assert len(asked) == 3  # the invalid state never reached the API
