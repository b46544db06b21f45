"""Row: the API bound off loopback without a token refuses to start; with one, a wrong or
missing token gets 401 and no data."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from totalrecall.infra import free_port
from totalrecall.launcher import launched_stack

from tests.chaos.report import ROWS, record
from tests.chaos.stack_inputs import chaos_stack

ROW = next(r for r in ROWS if r.startswith("the API bound off loopback"))


def _machine_ip() -> str:
    """This machine's address on its default route (not loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.254", 9))  # no packet is sent: picks the outgoing interface
        ip = str(s.getsockname()[0])
    assert not ip.startswith("127."), ip
    return ip


def _api_alone_without_token(host: str) -> tuple[int, str, float]:
    """`python -m totalrecall_recall_api` on `host` without a token: exit code, output, seconds."""
    env = {**os.environ, "TR_RECALL_HTTP_HOST": host, "TR_RECALL_HTTP_PORT": str(free_port())}
    env.pop("TR_RECALL_API_TOKEN", None)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "totalrecall_recall_api"], env=env,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - start


def _stack_without_token(home: Path) -> tuple[str, float]:
    """`totalrecall run` with the API on 0.0.0.0 and no token: must fail, saying why."""
    start = time.monotonic()
    with pytest.raises(RuntimeError) as failed, launched_stack(
            home, extra_env={"TR_RECALL_HTTP_HOST": "0.0.0.0"}, ready_timeout=150,
            unset=("TR_RECALL_API_TOKEN",)):
        pass
    return str(failed.value), time.monotonic() - start


def _check(home: Path) -> dict[str, object]:
    ip = _machine_ip()
    figures: dict[str, object] = {"machine_ip": ip}
    failures: list[str] = []
    for host in ("0.0.0.0", ip):
        code, out, took = _api_alone_without_token(host)
        figures[f"api_alone_{host}_exit"] = code
        figures[f"api_alone_{host}_s"] = round(took, 1)
        if code == 0 or "TR_RECALL_API_TOKEN" not in out:
            failures.append(f"recall-api on {host} without a token: exit {code}, {out[-300:]!r}")
    message, took = _stack_without_token(home / "no-token")
    figures["stack_refusal_s"] = round(took, 1)
    if "refused to start" not in message or "TR_RECALL_API_TOKEN" not in message:
        failures.append(f"`totalrecall run` without a token failed unclearly: {message[-500:]!r}")

    token = uuid.uuid4().hex
    with chaos_stack(home / "with-token", token=token,
                     extra_env={"TR_RECALL_HTTP_HOST": "0.0.0.0"}) as stack:
        url = f"http://{ip}:{stack.running.ports['api']}"  # reached off loopback
        ns = f"auth-{uuid.uuid4().hex[:8]}"
        secret_words = f"sentinel{uuid.uuid4().hex[:10]}"
        ok = httpx.post(f"{url}/memory/ingest", json={"summary": f"kept {secret_words}",
                                                      "namespace": ns},
                        headers={"Authorization": f"Bearer {token}"}, timeout=30)
        figures["right_token_ingest"] = ok.status_code
        if ok.status_code != 200:
            failures.append(f"the right token was refused: {ok.status_code} {ok.text}")
        stack.wait_recallable(secret_words, secret_words, namespace=ns)
        tried = {"none": {}, "wrong": {"Authorization": f"Bearer {uuid.uuid4().hex}"},
                 "not bearer": {"Authorization": token},
                 "prefix": {"Authorization": f"Bearer {token[:-1]}"}}
        bodies = {"/memory/recall": {"query": secret_words, "namespace": ns},
                  "/memory/ingest": {"summary": "forged", "namespace": ns},
                  "/memory/timeline": {"hours": 24, "namespace": ns}}
        # Every operation the API declares (its schema is public), not a chosen few.
        schema = httpx.get(f"{url}/openapi.json", timeout=30).json()
        endpoints = [(method, path.replace("{", "x").replace("}", ""), bodies.get(path, {}))
                     for path, ops in schema["paths"].items() for method in ops
                     if method in ("get", "post", "put", "delete", "patch")
                     and path not in ("/health", "/memory/health")]
        codes: list[int] = []
        for label, headers in tried.items():
            for method, path, body in endpoints:
                r = httpx.request(method, url + path, json=body if method != "get" else None,
                                  headers=headers, timeout=30)
                codes.append(r.status_code)
                if r.status_code != 401 or secret_words in r.text:
                    failures.append(f"{label} token on {path}: {r.status_code} {r.text[:200]!r}")
        figures["bad_token_requests"] = f"{len(tried)} kinds (none, wrong, not Bearer, prefix) x "\
            f"{len(endpoints)} operations (every one in /openapi.json), off loopback"
        figures["answered_401"] = f"{codes.count(401)}/{len(codes)}"
        # The public paths: answered without a token, and holding nothing of the memory.
        public = ["/metrics", "/openapi.json", "/docs", "/redoc", "/ui/", "/ui/app.js"]
        for path in public:
            r = httpx.get(url + path, timeout=30)
            if r.status_code == 401 or secret_words in r.text or ns in r.text:
                failures.append(f"public {path}: {r.status_code}, shows the memory or namespace")
        figures["public_without_token"] = ", ".join(public)
        # Liveness without a token: the status code only, none of the details.
        h = httpx.get(f"{url}/memory/health", timeout=10)
        figures["health_without_token"] = h.status_code
        if set(h.json()) - {"status"}:
            failures.append(f"health without a token shows details: {h.text[:200]!r}")
        figures["forged_ingest_recalled"] = any(
            "forged" in m["summary"] for m in stack.recall("forged", namespace=ns)["memories"])
        if figures["forged_ingest_recalled"]:
            failures.append("an ingest with a wrong token was stored")
    figures["failures"] = failures
    return figures


def _row(tmp_path: Path) -> None:
    figures = _check(tmp_path)
    failures = figures["failures"]
    record(ROW, not failures, figures, "; ".join(map(str, failures))[:500])  # type: ignore[arg-type]
    assert not failures, failures


@pytest.mark.chaos
def test_auth_off_loopback(tmp_path: Path) -> None:
    _row(tmp_path)


@pytest.mark.fast
def test_auth_off_loopback_fast(tmp_path: Path) -> None:
    """The CI-sized variant is the whole row (a minute): every operation's bad tokens too."""
    _row(tmp_path)
