"""Forget, export and import through the `totalrecall` command against the whole stack.

- forget: a memory recall finds is gone after `totalrecall forget`: from recall, the Markdown
  ground truth and the export, and still after `POST /memory/rebuild`.
- export / import: varied memories (metadata, tags, unicode, a long detail, old timestamps)
  exported, imported into a fresh namespace and exported again give the same lines (but the
  namespace).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from stacklib import Api, wait_for


def _ns(what: str) -> str:
    return f"{what}-{uuid.uuid4().hex[:8]}"


def cli(stack: Api, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TOTALRECALL_API": stack.url}
    if stack.token:
        env["TOTALRECALL_API_TOKEN"] = stack.token
    return subprocess.run([sys.executable, "-m", "totalrecall.main", *argv], env=env,
                          capture_output=True, text=True, timeout=600)


def exported(stack: Api, namespace: str) -> list[dict[str, Any]]:
    done = cli(stack, "export", "--namespace", namespace)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def daily_text(stack: Api, namespace: str, day: datetime) -> str:
    r = stack.post("/memory/file", {"path": f"daily/{day.date().isoformat()}.md",
                                    "namespace": namespace})
    r.raise_for_status()
    return str(r.json()["text"])


def test_forgotten_is_gone_everywhere_and_stays_gone_after_a_rebuild(stack: Api) -> None:
    ns = _ns("forget")
    now = datetime.now(UTC)
    r = stack.post("/memory/ingest", [
        {"id": "secret-1", "namespace": ns, "category": "conversation",
         "summary": "The garage door code is kept under the zebrafinch statue",
         "detail": "told by the user on the phone"},
        {"id": "keep-1", "namespace": ns, "category": "conversation",
         "summary": "The zebrafinch statue stands in the front garden"}])
    assert r.status_code == 200, r.text
    hit = stack.wait_recallable("where is the garage door code kept?", "garage door code",
                                namespace=ns)
    assert hit["id"] == "secret-1"
    stack.wait_recallable("where is the statue", "front garden", namespace=ns)
    assert "garage door code" in daily_text(stack, ns, now)

    done = cli(stack, "forget", "secret-1", "never-was", "--namespace", ns, "--json")
    assert done.returncode == 1, done.stderr  # one id was found nowhere
    assert json.loads(done.stdout) == {"namespace": ns, "forgotten": 1, "missing": ["never-was"]}

    def gone() -> None:
        found = [m["id"] for m in stack.recall("garage door code zebrafinch statue",
                                               namespace=ns)]
        assert "secret-1" not in found and "keep-1" in found
        assert "garage door code" not in daily_text(stack, ns, now)
        assert "front garden" in daily_text(stack, ns, now)
        assert [m["id"] for m in exported(stack, ns)] == ["keep-1"]

    gone()
    r = httpx.post(f"{stack.url}/memory/rebuild", json={}, headers=stack.headers, timeout=900)
    assert r.status_code == 200 and r.json()["ok"], r.text
    stack.wait_recallable("where is the statue", "front garden", namespace=ns)
    gone()


def _varied(ns: str) -> list[dict[str, Any]]:
    now = datetime.now(UTC).replace(microsecond=123456)
    long_detail = "\n".join(f"line {i}: ünïcödé ✓ 日本語 `code` <tag> & \"quotes\" \t tab"
                            for i in range(400))  # ~25k characters
    return [
        {"id": "plain", "namespace": ns, "summary": "A plain note about the weekly backup"},
        {"id": "rich/1:x@y", "namespace": ns, "category": "system.service",
         "subcategory": "failure", "actor": "watcher", "source": "journal",
         "summary": "nginx.service failed — bind() to 0.0.0.0:80 (address in use) 🙂",
         "detail": long_detail, "timestamp": (now - timedelta(days=40)).isoformat(),
         "tags": ["web", "incident"],
         "metadata": {"severity": "error", "service": "nginx", "exit_code": 1,
                      "duration_ms": 12.5, "host": {"name": "ws-1", "ips": ["10.0.0.7"]},
                      "flags": [True, False, None]}},
        {"id": "pref", "namespace": ns, "category": "user_pattern", "subcategory": "preference",
         "actor": "user", "summary": "The user prefers podman to docker",
         "timestamp": (now - timedelta(hours=30)).isoformat(),
         "metadata": {"severity": "info", "tags": ["containers"]}},
        {"id": "diag", "namespace": ns, "category": "diagnosis",
         "summary": "Root cause: the disk filled with journal files",
         "detail": "Fix: journalctl --vacuum-size=500M", "timestamp": now.isoformat(),
         "metadata": {"severity": "warning", "package": "systemd", "path": "/var/log/journal"}},
    ]


def test_export_import_export_is_lossless(stack: Api, tmp_path: Path) -> None:
    src, dst = _ns("export"), _ns("import")
    events = _varied(src)
    r = stack.post("/memory/ingest", events)
    assert r.status_code == 200, r.text
    wait_for(lambda: len(exported(stack, src)) == len(events), 120,
             f"{len(events)} memories stored")

    first = tmp_path / "first.jsonl"
    done = cli(stack, "export", "--namespace", src, "-o", str(first), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["exported"] == len(events)
    done = cli(stack, "import-jsonl", str(first), "--namespace", dst, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sent"] == len(events)
    wait_for(lambda: len(exported(stack, dst)) == len(events), 120,
             f"{len(events)} memories imported")
    second = tmp_path / "second.jsonl"
    assert cli(stack, "export", "--namespace", dst, "-o", str(second)).returncode == 0

    def by_id(path: Path) -> dict[str, dict[str, Any]]:
        lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        return {d["id"]: {**d, "namespace": None} for d in lines}

    a, b = by_id(first), by_id(second)
    assert a == b
    rich = a["rich/1:x@y"]
    assert rich["detail"].startswith("line 0: ünïcödé ✓ 日本語") and len(rich["detail"]) > 20_000
    assert rich["metadata"]["host"] == {"name": "ws-1", "ips": ["10.0.0.7"]}
    assert rich["metadata"]["tags"] == ["web", "incident"] and rich["actor"] == "watcher"
    # importing again stores nothing new
    done = cli(stack, "import-jsonl", str(first), "--namespace", dst, "--json")
    assert done.returncode == 0 and len(exported(stack, dst)) == len(events)


def test_status_and_doctor_on_the_running_stack(stack: Api) -> None:
    if stack.ports is None:
        return  # an external API: its ports are not known here
    env = {f"TOTALRECALL_{name.upper()}_PORT": str(port) for name, port in stack.ports.items()}
    run = dict(os.environ, **env)
    done = subprocess.run([sys.executable, "-m", "totalrecall.main", "status", "--json"],
                          env=run, capture_output=True, text=True, timeout=120)
    report = json.loads(done.stdout)
    assert report["parts"]["nats"]["status"] == "ok", report["parts"]["nats"]
    assert report["parts"]["postgres"]["status"] == "ok"
    assert report["parts"]["recall-api"]["http"] == 200
    done = subprocess.run([sys.executable, "-m", "totalrecall.main", "doctor", "--quick",
                           "--json"], env=run, capture_output=True, text=True, timeout=120)
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    for name in ("nats", "postgres", "api", "embedder", "indexer"):
        port = checks[f"port {name}"]
        assert port["status"] == "ok" and "in use by the stack" in port["detail"], port
    assert checks["running stack"]["detail"].startswith("running")
