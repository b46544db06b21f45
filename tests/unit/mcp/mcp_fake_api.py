"""A tiny fake recall API (the HTTP contract only, in memory) served by uvicorn in a thread.

A plain module (not conftest.py) so its name is unique on sys.path."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from waiting import wait_for_sync

TOKEN = "test-token"


@dataclass
class FakeApi:
    url: str = ""
    memories: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    alerts: list[dict[str, Any]] = field(default_factory=list)  # GET /memory/alerts answers these

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [b for p, b, _ in self.requests if p == path]


def _memory(event: dict[str, Any]) -> dict[str, Any]:
    return {"id": event.get("id") or uuid.uuid4().hex, "score": 0.8,
            "timestamp": event.get("timestamp") or datetime.now(UTC).isoformat(),
            "category": event.get("category") or "conversation", "summary": event["summary"],
            "detail": event.get("detail", ""), "tier": "hot",
            "namespace": event.get("namespace") or "default", "relative_time": "just now"}


def make_app(api: FakeApi) -> Starlette:
    async def handle(request: Request) -> JSONResponse:
        body = await request.json() if request.method == "POST" else {}
        api.requests.append((request.url.path, body, request.headers.get("authorization")))
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"detail": "missing or wrong bearer token"}, 401)
        path = request.url.path
        if path in ("/memory/store", "/memory/ingest"):
            events = body if isinstance(body, list) else [body]
            if any(not e.get("summary") for e in events):
                return JSONResponse({"detail": [{"loc": ["body", "summary"],
                                                 "msg": "Field required", "type": "missing"}]}, 422)
            new = [_memory(e) for e in events]
            api.memories.extend(new)
            return JSONResponse({"ids": [m["id"] for m in new], "accepted": len(new)})
        if path == "/memory/recall":
            if body["query"] == "trigger-422":
                return JSONResponse({"detail": "timeframe 'forever' is not valid"}, 422)
            words = set(body["query"].lower().split())
            hits = [m for m in api.memories if m["namespace"] == body.get("namespace", "default")
                    and words & set((m["summary"] + " " + m["detail"]).lower().split())]
            hits = hits[: body.get("maxResults", 6)]
            block = "<system_memory>\n" + "\n\n".join(
                f"[{m['relative_time']} | {m['category']}]\n{m['summary']}" for m in hits
            ) + "\n</system_memory>"
            return JSONResponse({"memories": hits, "system_memory": block if hits else ""})
        if path == "/memory/timeline":
            ns = body.get("namespace", "default")
            return JSONResponse({"memories": [m for m in api.memories if m["namespace"] == ns]})
        if path == "/memory/file":
            text = "# MEMORY\nline two\nline three\nline four"
            if body["path"] != "MEMORY.md":
                text = ""
            return JSONResponse({"path": body["path"], "text": text})
        if path == "/memory/supersede":
            if not any(m["id"] == body["old_id"] for m in api.memories):
                return JSONResponse({"detail": f"no memory {body['old_id']!r}"}, 404)
            new_memory = _memory({**body["new"], "namespace": body["namespace"]})
            api.memories.append(new_memory)
            return JSONResponse({"ids": [new_memory["id"]], "accepted": 1})
        if path == "/memory/warm":
            return JSONResponse({"warmed": 0})
        if path == "/memory/flush":
            return JSONResponse({"stored": len(body.get("messages", []))})
        if path == "/memory/forget":
            ns = body.get("namespace", "default")
            mine = {m["id"] for m in api.memories if m["namespace"] == ns}
            api.memories = [m for m in api.memories
                            if not (m["namespace"] == ns and m["id"] in body["ids"])]
            return JSONResponse({"forgotten": len(mine & set(body["ids"])),
                                 "missing": [i for i in body["ids"] if i not in mine]})
        if path == "/memory/alerts":
            shown = [a for a in api.alerts if request.query_params.get("state") == "all"
                     or a["state"] == "open"]
            return JSONResponse({"alerts": shown,
                                 "namespace": request.query_params.get("namespace")})
        if path == "/memory/health":
            return JSONResponse({"status": "ok"})
        return JSONResponse({"detail": "Not Found"}, 404)

    routes = [Route(p, handle, methods=["GET", "POST"]) for p in (
        "/memory/store", "/memory/ingest", "/memory/recall", "/memory/timeline", "/memory/file",
        "/memory/health", "/memory/flush", "/memory/warm", "/memory/forget",
        "/memory/supersede", "/memory/alerts")]
    return Starlette(routes=routes)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_fake_api() -> Iterator[FakeApi]:
    api = FakeApi()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(make_app(api), host="127.0.0.1", port=port,
                                          log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for_sync(lambda: server.started, timeout=10, interval=0.02,
                  what="the fake recall API to start")
    api.url = f"http://127.0.0.1:{port}"
    try:
        yield api
    finally:
        server.should_exit = True
        thread.join(5)
