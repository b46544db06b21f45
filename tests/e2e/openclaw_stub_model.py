"""A stub OpenAI-compatible model server for the OpenClaw end-to-end test.

Serves ``POST /v1/chat/completions`` (streaming SSE or plain JSON) and ``GET /v1/models``, records
every request body, and answers from a script: when the latest user message contains
``STORE:<text>`` and no tool result follows it yet, the model calls ``memory_store`` with that text
(directly, or through OpenClaw's Tool Search ``tool_call`` when the plugin tools are catalogued);
otherwise it replies with a short text. Run standalone: ``python openclaw_stub_model.py PORT LOG``.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL_ID = "stub-model"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def system_prompt(body: dict[str, Any]) -> str:
    return "\n".join(_text(m.get("content")) for m in body.get("messages", [])
                     if m.get("role") in ("system", "developer"))


def decide(body: dict[str, Any]) -> dict[str, Any]:
    """The next assistant message: a memory_store tool call, or text."""
    messages = body.get("messages", [])
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"
                     and "OPENCLAW_INTERNAL_CONTEXT" not in _text(m.get("content"))), default=-1)
    user_text = _text(messages[last_user].get("content")) if last_user >= 0 else ""
    tool_done = any(m.get("role") == "tool" for m in messages[last_user + 1:])
    m = re.search(r"STORE:(.+)", user_text)
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    if m and not tool_done and tools & {"memory_store", "tool_call"}:
        args: dict[str, Any] = {"summary": m.group(1).strip(), "category": "user_pattern"}
        name = "memory_store"
        if "memory_store" not in tools:  # OpenClaw's Tool Search: plugin tools via tool_call
            name, args = "tool_call", {"id": "memory_store", "args": args}
        return {"tool_calls": [{"id": f"call_{int(time.time() * 1000)}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]}
    return {"content": "Stub reply: nothing to add." if not tool_done else "Stored it."}


class Handler(BaseHTTPRequestHandler):
    server: StubServer

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        self.server.record(body)
        msg = decide(body)
        created = int(time.time())
        finish = "tool_calls" if "tool_calls" in msg else "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        if not body.get("stream"):
            self._json(200, {"id": "chatcmpl-stub", "object": "chat.completion", "created": created,
                             "model": MODEL_ID, "usage": usage, "choices": [{
                                 "index": 0, "finish_reason": finish,
                                 "message": {"role": "assistant", "content": None, **msg}}]})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None,
                  extra: dict[str, Any] | None = None) -> None:
            payload = {"id": "chatcmpl-stub", "object": "chat.completion.chunk",
                       "created": created, "model": MODEL_ID,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                       **(extra or {})}
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if "tool_calls" in msg:
            tc = msg["tool_calls"][0]
            chunk({"tool_calls": [{"index": 0, **tc}]})
        else:
            chunk({"content": msg["content"]})
        chunk({}, finish, {"usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class StubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, log: Path | None = None) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.requests: list[dict[str, Any]] = []
        self.log = log
        self._lock = threading.Lock()

    def record(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)
            if self.log:
                with self.log.open("a") as f:
                    f.write(json.dumps(body) + "\n")

    def start(self) -> StubServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


if __name__ == "__main__":
    StubServer(int(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None).serve_forever()
