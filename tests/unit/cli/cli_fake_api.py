"""An in-memory recall API (httpx.MockTransport) for the CLI's verbs, and a way to run them.

A plain module (not conftest.py) so its name is unique on sys.path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import totalrecall_client
from totalrecall.main import main as cli_main
from totalrecall_schema import MemoryEvent, memory_key

NOW = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)


@dataclass
class FakeApi:
    """What the CLI sees of the recall API: events kept as the indexer would keep them."""

    events: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> exported line
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    down: bool = False
    #: cut the export stream after this many lines (a server that died mid-export)
    cut_export_after: int | None = None

    def add(self, **fields: Any) -> MemoryEvent:
        ev = MemoryEvent(**fields)
        self.events[ev.key] = {**ev.model_dump(mode="json"), "repeat_count": 1,
                               "last_seen": None}
        return ev

    def bodies(self, path: str) -> list[Any]:
        return [b for _m, p, b in self.requests if p == path]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.requests.append((request.method, path, body))
        params = dict(request.url.params)
        if path == "/memory/ingest":
            events = body if isinstance(body, list) else [body]
            dups = 0
            for e in events:
                ev = MemoryEvent(**{k: v for k, v in e.items() if k != "tags"})
                dups += ev.key in self.events
                self.events[ev.key] = {**ev.model_dump(mode="json"), "repeat_count": 1,
                                       "last_seen": None}
            return httpx.Response(200, json={"ids": [e.get("id", "x") for e in events],
                                             "accepted": len(events), "duplicates": dups})
        if path == "/memory/forget":
            ns = body["namespace"]
            found = [i for i in body["ids"] if self.events.pop(memory_key(ns, i), None)]
            return httpx.Response(200, json={"forgotten": len(found),
                                             "missing": [i for i in body["ids"]
                                                         if i not in found]})
        if path == "/memory/export":
            ns = params.get("namespace", "default")
            lines = [json.dumps(e, ensure_ascii=False) + "\n"
                     for k, e in sorted(self.events.items()) if e["namespace"] == ns]
            return httpx.Response(200, stream=_Stream(lines, self.cut_export_after),
                                  headers={"content-type": "application/x-ndjson"})
        if path == "/memory/stats":
            ns = params.get("namespace")
            mine = [e for e in self.events.values() if ns is None or e["namespace"] == ns]
            cats: dict[str, int] = {}
            for e in mine:
                cats[e["category"]] = cats.get(e["category"], 0) + 1
            return httpx.Response(200, json={
                "namespace": ns, "total": len(mine), "by_category": cats,
                "by_tier": {"hot": len(mine)} if mine else {}, "oldest": None, "newest": None,
                "index": {"model": "m:abc", "dim": 384, "pg_count": len(mine),
                          "markdown_days": 1, "docs": {"hot": len(mine), "warm": 0, "cold": 0},
                          "writes_held": {}, "reindex": {}}})
        if path in ("/memory/timeline", "/memory/recall"):
            ns = body.get("namespace", "default")
            mine = sorted((e for e in self.events.values() if e["namespace"] == ns),
                          key=lambda e: e["timestamp"])
            if path == "/memory/recall":
                words = set(body["query"].lower().split())
                mine = [e for e in mine if words & set(e["summary"].lower().split())]
            memories = [{"id": e["id"], "score": 0.5, "timestamp": e["timestamp"],
                         "category": e["category"], "summary": e["summary"],
                         "severity": e["metadata"]["severity"], "namespace": ns} for e in mine]
            out: dict[str, Any] = {"memories": memories}
            if path == "/memory/recall":
                out["system_memory"] = "<system_memory>\n" + "\n".join(
                    m["summary"] for m in memories) + "\n</system_memory>" if memories else ""
            return httpx.Response(200, json=out)
        return httpx.Response(404, json={"detail": "Not Found"})


class _Stream(httpx.SyncByteStream):
    def __init__(self, lines: list[str], cut_after: int | None) -> None:
        self.lines, self.cut_after = lines, cut_after

    def __iter__(self) -> Iterator[bytes]:
        for i, line in enumerate(self.lines):
            if self.cut_after is not None and i >= self.cut_after:
                raise httpx.RemoteProtocolError("peer closed connection (incomplete chunked read)")
            yield line.encode()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    """The fake answers every client the CLI makes."""
    fake = FakeApi()
    real = totalrecall_client.TotalRecallClient

    def client(*args: Any, **kw: Any) -> totalrecall_client.TotalRecallClient:
        return real(*args, transport=httpx.MockTransport(fake), **kw)

    monkeypatch.setattr(totalrecall_client, "TotalRecallClient", client)
    monkeypatch.delenv("TOTALRECALL_NAMESPACE", raising=False)
    return fake


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err
