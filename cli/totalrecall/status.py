"""What `totalrecall status` reports (the verb: commands/stack.py): the health of each part of
the local stack, what is degraded and why.

Asks each service's health endpoint, NATS's monitoring endpoint and whether Postgres listens (the
ports `totalrecall run` uses). Exit code 0 when every part is ok, 1 when one is degraded (it runs,
without something: e.g. the embedder without its model, so recall is keyword-only), 2 when one is
down.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from typing import Any

from .infra.ports import Ports

EXIT_OK, EXIT_DEGRADED, EXIT_DOWN = 0, 1, 2
PARTS = (("recall-api", "api", "/memory/health"), ("embedder", "embedder", "/health"),
         ("indexer", "indexer", "/health"), ("watchers", "watchers", "/health"))


def _get(url: str, timeout: float) -> tuple[int | None, dict[str, Any]]:
    req = urllib.request.Request(url)  # noqa: S310 - loopback, or the operator's own URL
    token = os.environ.get("TOTALRECALL_API_TOKEN")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"{}")
        except ValueError:
            return exc.code, {}
    except (OSError, ValueError) as exc:
        return None, {"error": str(exc)}


def why_degraded(name: str, body: dict[str, Any]) -> list[str]:
    """Plain reasons from a health body (what a user needs to fix)."""
    reasons: list[str] = []
    if name == "embedder":
        if body.get("fallback") or body.get("model_error"):
            reasons.append("no embedding model: recall is keyword-only ("
                           f"{body.get('model_error') or 'fallback'}; model {body.get('model_path')})"
                           "; build it with `totalrecall model build`")
        for part in ("nats", "consuming", "query_rpc"):
            if body.get(part) is False:
                reasons.append(f"{part} down")
    checks = body.get("checks")
    if isinstance(checks, dict):
        for part, check in checks.items():
            if isinstance(check, dict) and not check.get("ok", True):
                reasons.append(f"{part}: {check.get('error') or 'not ok'}")
    for key in ("writes_held", "reindex", "disk_full", "error"):
        if body.get(key):
            reasons.append(f"{key}: {body[key]}")
    return reasons


def _infra(ports: Ports, timeout: float) -> dict[str, Any]:
    """NATS (its monitoring endpoint: JetStream enabled and healthy) and Postgres (listening)."""
    parts: dict[str, Any] = {}
    code, body = _get(f"http://127.0.0.1:{ports.nats_monitor}/healthz?js-enabled-only=true",
                      timeout)
    if code == 200:
        parts["nats"] = {"status": "ok", "http": code, "reasons": [], "health": body}
    else:
        why = (f"not reachable on 127.0.0.1:{ports.nats_monitor}: {body.get('error')}"
               if code is None else f"HTTP {code}: {body.get('error') or body}")
        parts["nats"] = {"status": "down", "http": code, "reasons": [why], "health": body}
    with socket.socket() as sock:
        sock.settimeout(timeout)
        listening = sock.connect_ex(("127.0.0.1", ports.postgres)) == 0
    parts["postgres"] = {
        "status": "ok" if listening else "down", "http": None,
        "reasons": [] if listening else [f"nothing listens on 127.0.0.1:{ports.postgres}"],
        "health": {"listening": listening, "port": ports.postgres}}
    return parts


def collect(ports: Ports | None = None, timeout: float = 2.0) -> dict[str, Any]:
    """{"status": ok|degraded|down, "parts": {name: {status, http, reasons, health}}}."""
    ports = ports or Ports.from_env()
    parts: dict[str, Any] = _infra(ports, timeout)
    for name, port_name, path in PARTS:
        code, body = _get(f"http://127.0.0.1:{getattr(ports, port_name)}{path}", timeout)
        if code is None:
            status, reasons = "down", [f"not reachable: {body.get('error')}"]
        else:
            status = str(body.get("status") or ("ok" if code == 200 else "down"))
            if code != 200 and status == "ok":
                status = "down"
            reasons = why_degraded(name, body) if status != "ok" else []
            if status != "ok" and not reasons:
                reasons = [f"HTTP {code}, status {status}"]
        parts[name] = {"status": status, "http": code, "reasons": reasons, "health": body}
    states = {p["status"] for p in parts.values()}
    overall = "ok" if states == {"ok"} else "degraded" if states <= {"ok", "degraded"} else "down"
    return {"status": overall, "parts": parts}


def render(report: dict[str, Any]) -> str:
    lines = [f"Total Recall: {report['status'].upper()}"]
    for name, part in report["parts"].items():
        lines.append(f"  {name:<11} {part['status']}")
        lines += [f"      - {r}" for r in part["reasons"]]
    if report["status"] == "down":
        lines.append("Start the stack with `totalrecall run`; `totalrecall doctor` checks the "
                     "install and says how to fix what is missing.")
    return "\n".join(lines)


def exit_code(report: dict[str, Any]) -> int:
    return {"ok": EXIT_OK, "degraded": EXIT_DEGRADED}.get(report["status"], EXIT_DOWN)
