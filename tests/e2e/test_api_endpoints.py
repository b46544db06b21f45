"""Every recall-api endpoint against the real stack (real NATS, Postgres, Zvec, model)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from stacklib import Api, api_with_token, wait_for


def _ns() -> str:
    return f"api-{uuid.uuid4().hex[:8]}"


def test_ingest_list_store_recall_and_namespace_isolation(stack: Api) -> None:
    ns, other = _ns(), _ns()
    r = stack.post("/memory/ingest", [
        {"summary": "nginx.service failed: bind() to 0.0.0.0:80 failed (address in use)",
         "category": "system.service", "namespace": ns, "id": "nginx-1",
         "metadata": {"severity": "error", "service": "nginx"}},
        {"summary": "Installed firefox 121 via nix profile", "category": "system.package",
         "namespace": ns},
    ])
    assert r.status_code == 200 and r.json()["accepted"] == 2, r.text
    assert r.json()["ids"][0] == "nginx-1"
    again = stack.post("/memory/ingest", {"summary": "nginx.service failed again", "id": "nginx-1",
                                          "namespace": ns, "category": "system.service"})
    assert again.json()["duplicates"] == 1  # same id → one memory
    stored = stack.post("/memory/store", {"summary": "User prefers podman over docker",
                                          "category": "user_pattern", "namespace": ns})
    assert stored.status_code == 200
    hit = stack.wait_recallable("why is nginx not starting?", "bind()", namespace=ns)
    assert hit["id"] == "nginx-1" and hit["summary"].startswith("nginx.service failed: bind()")
    assert stack.recall("nginx failed", namespace=other) == []
    body = stack.post("/memory/recall", {"query": "why is nginx down?", "namespace": ns}).json()
    assert "nginx" in body["system_memory"]
    stack.wait_recallable("container runtime preference", "podman", namespace=ns)


def test_greeting_returns_no_memories(stack: Api) -> None:
    ns = _ns()
    stack.post("/memory/ingest", {"summary": "hello world service crashed", "namespace": ns})
    stack.wait_recallable("hello world service", "crashed", namespace=ns)
    body = stack.post("/memory/recall", {"query": "hello!", "namespace": ns}).json()
    assert body["memories"] == [] and body["system_memory"] == ""


def test_an_unrelated_question_recalls_nothing(stack: Api) -> None:
    """Recent memories are not padding: a question no memory is about injects nothing."""
    ns = _ns()
    stack.post("/memory/ingest", [
        {"summary": "nginx.service failed: bind() to 0.0.0.0:80 failed (address in use)",
         "category": "system.service", "namespace": ns, "metadata": {"severity": "error"}},
        {"summary": "firefox (PID 1640) using 61% CPU", "category": "system.process",
         "namespace": ns},
        {"summary": "The user prefers neovim with the gruvbox theme", "category": "user_pattern",
         "actor": "user", "namespace": ns}])
    stack.wait_recallable("which editor theme", "gruvbox", namespace=ns)
    stack.wait_recallable("nginx bind address in use", "bind()", namespace=ns)
    for query in ("write a haiku about autumn leaves", "what is the capital of France?"):
        body = stack.post("/memory/recall", {"query": query, "namespace": ns}).json()
        assert body["query_class"] == "task"
        assert body["memories"] == [], (query, body["memories"])
    # in the first person: the user's own memories get a prior, not evidence
    body = stack.post("/memory/recall", {"query": "help me write a poem about the sea",
                                         "namespace": ns}).json()
    assert body["memories"] == [], body["memories"]


def test_escalation_from_hot_to_warm_tier(stack: Api) -> None:
    ns = _ns()
    ten_days_ago = (datetime.now(UTC) - timedelta(days=10)).isoformat()
    stack.post("/memory/ingest", {"summary": "Kernel panic after installing nvidia driver 550",
                                  "category": "error", "subcategory": "kernel", "namespace": ns,
                                  "timestamp": ten_days_ago})
    hit = stack.wait_recallable("kernel panic nvidia driver", "nvidia", namespace=ns)
    body = stack.post("/memory/recall", {"query": "kernel panic with the nvidia driver",
                                         "namespace": ns, "timeframe": "auto"}).json()
    found = [m for m in body["memories"] if m["id"] == hit["id"]]
    assert found and found[0]["tier"] == "warm"  # not in hot: found by escalating
    assert "Last week" in body["system_memory"] or "days ago" in body["system_memory"]
    narrow = stack.post("/memory/recall", {"query": "kernel panic nvidia driver", "namespace": ns,
                                           "timeframe": "24h"}).json()
    assert narrow["memories"] == []


def test_timeline_stats_file_flush_warm_health_metrics(stack: Api) -> None:
    ns = _ns()
    now = datetime.now(UTC)
    for i in range(3):
        stack.post("/memory/ingest", {"summary": f"timeline step {i}", "namespace": ns,
                                      "timestamp": (now - timedelta(minutes=30 - i)).isoformat()})
    tl = wait_for(lambda: (m := stack.post("/memory/timeline", {"hours": 1, "namespace": ns})
                           .json()["memories"]) and len(m) == 3 and m, 30, "the timeline")
    assert [m["summary"] for m in tl] == ["timeline step 0", "timeline step 1", "timeline step 2"]

    stats = httpx.get(f"{stack.url}/memory/stats", params={"namespace": ns}, timeout=10).json()
    assert stats["total"] == 3 and stats["by_category"] == {"conversation": 3}
    assert set(stats["index"]["tiers"]) == {"hot", "warm", "cold"}

    day = f"{now - timedelta(minutes=30):%Y-%m-%d}"
    text = stack.post("/memory/file", {"path": f"memory/daily/{day}.md",
                                       "namespace": ns}).json()["text"]
    assert "timeline step 1" in text
    assert stack.post("/memory/file", {"path": "daily/1999-01-01.md"}).json() == {
        "path": "daily/1999-01-01.md", "text": ""}
    assert stack.post("/memory/file", {"path": "../../../etc/passwd"}).status_code == 400

    oc = stack.post("/memory/recall", {"query": "timeline step 1", "namespace": ns,
                                       "format": "openclaw"}).json()
    first = oc["results"][0]
    assert first["path"] == f"memory/daily/{day}.md" and first["startLine"] > 0
    lines = text.splitlines()[first["startLine"] - 1: first["endLine"]]
    assert any(first["snippet"].split("\n")[0] in line for line in lines)

    flush = {"sessionId": "s-1", "namespace": ns, "messages": [
        {"role": "user", "content": "Remember: the backup disk is /dev/sdc and must stay unmounted"},
        {"role": "assistant", "content": "Understood, I will keep /dev/sdc unmounted."}]}
    first_flush = stack.post("/memory/flush", flush).json()
    assert first_flush["accepted"] == 2
    assert stack.post("/memory/flush", flush).json()["duplicates"] == 2
    stack.wait_recallable("which disk is the backup disk?", "/dev/sdc", namespace=ns)

    assert stack.post("/memory/warm", {"sessionId": "s-1"}).json()["ok"] is True
    health = httpx.get(f"{stack.url}/memory/health", timeout=10).json()
    assert health["status"] == "ok", health
    metrics = httpx.get(f"{stack.url}/metrics", timeout=10).text
    assert 'totalrecall_recall_stage_seconds_bucket{le="0.005",stage="total"}' in metrics
    assert 'stage="embed"' in metrics and 'stage="bm25"' in metrics and 'stage="vector_hot"' in metrics


def test_a_daily_log_is_read_only_within_its_namespace(stack: Api) -> None:
    """Two namespaces write the same day's log; each reads only its own memories there, and
    the line ranges recall cites still hold the cited memory."""
    mine, theirs = _ns(), _ns()
    now = datetime.now(UTC)
    secrets = {mine: "the staging database password hint is aubergine",
               theirs: "the payroll export runs at 03:00 from cron on vault-2"}
    for ns, summary in secrets.items():
        stack.post("/memory/ingest", {"summary": summary, "namespace": ns,
                                      "detail": f"{ns} detail line", "timestamp": now.isoformat()})
    stack.wait_recallable("staging database password hint", "aubergine", namespace=mine)
    stack.wait_recallable("when does the payroll export run", "payroll", namespace=theirs)
    path = f"memory/daily/{now:%Y-%m-%d}.md"

    def read(**scope: object) -> str:
        r = stack.post("/memory/file", {"path": path, **scope})
        assert r.status_code == 200, r.text
        return str(r.json()["text"])

    def at_one_moment(ns: str) -> tuple[str, str]:
        """The file read for `ns` and for both namespaces while nothing was appended: the
        stack's watchers log the machine's events into the same day meanwhile. A scoped read
        keeps a line for every line of the file, so an unchanged one means an unchanged file."""
        for _ in range(20):
            text, whole = read(namespace=ns), read(namespaces=[mine, theirs])
            if read(namespace=ns) == text:
                return text, whole
        raise AssertionError(f"{path} kept growing")

    both = read(namespaces=[mine, theirs])  # the same file holds both
    assert secrets[mine] in both and secrets[theirs] in both
    for ns, other in ((mine, theirs), (theirs, mine)):
        text, both = at_one_moment(ns)
        assert secrets[ns] in text and f"{ns} detail line" in text
        assert secrets[other] not in text and other not in text
        assert len(text.splitlines()) == len(both.splitlines())
        res = stack.post("/memory/recall", {"query": secrets[ns], "namespace": ns,
                                            "format": "openclaw"}).json()["results"][0]
        assert res["path"] == path and res["startLine"] > 0, res
        cited = text.splitlines()[res["startLine"] - 1: res["endLine"]]
        assert secrets[ns] in cited[0] and f"{ns} detail line" in cited
        assert res["citation"] == f"{path}#L{res['startLine']}-L{res['endLine']}"
    assert secrets[mine] not in read() and secrets[theirs] not in read()  # absent → "default"


def test_compact_and_rebuild_keep_answers(stack: Api) -> None:
    ns = _ns()
    stack.post("/memory/ingest", {"summary": "Wi-Fi drops every 20 minutes on wlp2s0",
                                  "category": "system.network", "namespace": ns})
    before = stack.wait_recallable("wifi keeps disconnecting", "wlp2s0", namespace=ns)
    assert stack.post("/memory/compact", {}).status_code == 200
    r = httpx.post(f"{stack.url}/memory/rebuild", json={}, timeout=600)
    assert r.status_code == 200 and r.json()["ok"], r.text
    after = stack.wait_recallable("wifi keeps disconnecting", "wlp2s0", namespace=ns)
    assert after["id"] == before["id"]


@pytest.mark.parametrize(("path", "body", "status", "fragment"), [
    ("/memory/ingest", {"summary": ""}, 422, "summary"),
    ("/memory/ingest", {"summary": "x", "category": "nope"}, 422, "unknown category"),
    ("/memory/ingest", {"summary": "x", "timestamp": "2999-01-01T00:00:00Z"}, 422, "future"),
    ("/memory/ingest", [], 422, "no events"),
    ("/memory/recall", {"query": "x", "timeframe": "forever"}, 422, "timeframe"),
    ("/memory/recall", {"nothing": 1}, 422, "query"),
    ("/memory/timeline", {"hours": -1}, 422, "hours"),
])
def test_bad_inputs_get_clear_4xx(stack: Api, path: str, body: object, status: int,
                                  fragment: str) -> None:
    r = stack.post(path, body)
    assert r.status_code == status and fragment in r.json()["detail"], r.text


def test_oversized_body_is_rejected(stack: Api) -> None:
    r = httpx.post(f"{stack.url}/memory/ingest", content=b"[" + b'{"summary":"x"},' * 200_000
                   + b'{"summary":"x"}]', headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 413


@pytest.fixture
def token_api(stack: Api) -> Iterator[str]:
    """A second recall-api process on the same stack, bound with a token (as off-loopback)."""
    with api_with_token(stack, "e2e-token-123") as url:
        yield url


def test_bearer_token_auth_over_http(token_api: str) -> None:
    body = {"query": "anything"}
    assert httpx.post(f"{token_api}/memory/recall", json=body).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.post(f"{token_api}/memory/recall", json=body, headers=wrong).status_code == 401
    right = {"Authorization": "Bearer e2e-token-123"}
    assert httpx.post(f"{token_api}/memory/recall", json=body, headers=right, timeout=10
                      ).status_code == 200
    assert httpx.get(f"{token_api}/memory/health", timeout=10).status_code == 200
