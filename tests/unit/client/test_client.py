"""TotalRecallClient / AsyncTotalRecallClient against httpx.MockTransport (no network)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from totalrecall_client import (
    AsyncTotalRecallClient,
    IngestEvent,
    TotalRecallAuthError,
    TotalRecallBadRequest,
    TotalRecallClient,
    TotalRecallConnectionError,
    TotalRecallError,
    TotalRecallNotFound,
    TotalRecallServerError,
    TotalRecallTimeout,
)
from totalrecall_schema import RecallResponse

NOW = "2026-11-22T10:00:00+00:00"
MEMORY = {"id": "k1", "score": 0.91, "timestamp": NOW, "category": "system.service",
          "summary": "postgresql failed: port 5432 in use", "detail": "", "tier": "hot"}
BLOCK = ('<system_memory retrieved_at="x">\n[2 minutes ago | system.service]\npostgres\n'
         '</system_memory>')


class Recorder:
    """A fake recall API: records every request, answers like the contract says."""

    def __init__(self, override: Callable[[httpx.Request], httpx.Response | None] | None = None):
        self.requests: list[httpx.Request] = []
        self.override = override

    def body(self, i: int = -1) -> Any:
        return json.loads(self.requests[i].content)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.override and (r := self.override(request)):
            return r
        path = request.url.path
        if path in ("/memory/ingest", "/memory/store"):
            body = json.loads(request.content)
            n = len(body) if isinstance(body, list) else 1
            return httpx.Response(200, json={"ids": [f"id{i}" for i in range(n)], "accepted": n})
        if path == "/memory/recall":
            return httpx.Response(200, json={"memories": [MEMORY], "system_memory": BLOCK,
                                             "took_ms": 12.5})
        if path == "/memory/timeline":
            return httpx.Response(200, json={"memories": [MEMORY]})
        if path == "/memory/health":
            return httpx.Response(200, json={"status": "ok", "nats": "ok"})
        if path == "/memory/stats":
            return httpx.Response(200, json={"total": 3, "by_category": {"system.service": 3}})
        if path in ("/memory/compact", "/memory/rebuild"):
            return httpx.Response(200, json={"status": "started"})
        if path == "/memory/file":
            return httpx.Response(200, json={"path": json.loads(request.content)["path"],
                                             "text": ""})
        if path == "/memory/flush":
            return httpx.Response(200, json={"stored": 1, "ids": ["f1"]})
        if path == "/memory/warm":
            return httpx.Response(200, json={"warmed": 5})
        if path == "/memory/forget":
            ids = json.loads(request.content)["ids"]
            return httpx.Response(200, json={"forgotten": len(ids) - 1, "missing": ids[-1:]})
        if path == "/metrics":
            return httpx.Response(200, text="# HELP x\nx 1\n")
        return httpx.Response(404, json={"detail": "Not Found"})


@pytest.fixture
def fake() -> Recorder:
    return Recorder()


@pytest.fixture
def client(fake: Recorder) -> TotalRecallClient:
    return TotalRecallClient("http://tr.test/", transport=httpx.MockTransport(fake))


def test_recall_sends_contract_body_and_returns_schema_model(client: TotalRecallClient,
                                                             fake: Recorder) -> None:
    res = client.recall("why did postgres fail?", max_results=3, timeframe="7d",
                        category="system.service")
    assert isinstance(res, RecallResponse)
    assert res.memories[0].id == "k1" and res.memories[0].score == pytest.approx(0.91)
    assert res.system_memory.startswith("<system_memory")
    req = fake.requests[0]
    assert req.method == "POST" and str(req.url) == "http://tr.test/memory/recall"
    assert fake.body() == {"query": "why did postgres fail?", "maxResults": 3, "timeframe": "7d",
                           "category": "system.service", "namespace": "default"}
    assert req.headers["content-type"] == "application/json"
    assert "authorization" not in req.headers


def test_recall_as_of_a_moment(client: TotalRecallClient, fake: Recorder) -> None:
    client.recall("what broke last Saturday?", as_of=datetime(2023, 3, 9, 15, 47, tzinfo=UTC))
    assert fake.body()["asOf"] == "2023-03-09T15:47:00Z"


def test_recall_of_several_namespaces(fake: Recorder) -> None:
    TotalRecallClient("http://tr.test", transport=httpx.MockTransport(fake)).recall(
        "q", namespaces=["agent-a", "default"])
    assert fake.body()["namespaces"] == ["agent-a", "default"]
    assert "namespace" not in fake.body()  # the default namespace is not read unless named
    TotalRecallClient("http://tr.test", namespace="agent-a", transport=httpx.MockTransport(
        fake)).recall("q", namespaces=["default"])
    assert fake.body()["namespace"] == "agent-a" and fake.body()["namespaces"] == ["default"]
    with pytest.raises(ValueError):
        TotalRecallClient("http://tr.test", transport=httpx.MockTransport(fake)).recall(
            "q", namespaces=["../etc"])


def test_recall_limited_to_hosts(client: TotalRecallClient, fake: Recorder) -> None:
    client.recall("what failed?", hosts=["db-01", "web-02"])
    assert fake.body()["hosts"] == ["db-01", "web-02"]
    client.recall("what failed?")
    assert "hosts" not in fake.body()  # not sent unless asked for (an older API refuses it)


def test_recall_validates_locally(client: TotalRecallClient, fake: Recorder) -> None:
    with pytest.raises(ValueError):
        client.recall("")
    with pytest.raises(ValueError):
        client.recall("q", max_results=500)
    assert fake.requests == []


def test_bearer_token_and_namespace_default(fake: Recorder) -> None:
    c = TotalRecallClient("http://tr.test", token="s3cret", namespace="agent-a",
                          transport=httpx.MockTransport(fake))
    c.recall("q")
    c.store("remember me", category="user_pattern")
    c.store("elsewhere", namespace="agent-b")
    c.timeline(hours=2)
    assert all(r.headers["authorization"] == "Bearer s3cret" for r in fake.requests)
    assert fake.body(0)["namespace"] == "agent-a"
    assert fake.body(1) == {"summary": "remember me", "category": "user_pattern",
                            "namespace": "agent-a"}
    assert fake.body(2)["namespace"] == "agent-b"
    assert fake.body(3) == {"hours": 2, "namespace": "agent-a"}


def test_ingest_one_or_many_models_or_dicts(client: TotalRecallClient, fake: Recorder) -> None:
    ts = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)
    one = client.ingest(IngestEvent(summary="disk at 93%", category="system.storage", id="e1",
                                    timestamp=ts))
    assert one.ids == ["id0"] and one.accepted == 1
    assert fake.body() == {"summary": "disk at 93%", "detail": "", "category": "system.storage",
                           "tags": [], "metadata": {}, "id": "e1",
                           "timestamp": "2026-11-20T08:30:00Z"}
    many = client.ingest([{"summary": "a", "timestamp": ts}, IngestEvent(summary="b")],
                         namespace="ns1")
    assert many.accepted == 2
    body = fake.body()
    assert [e["summary"] for e in body] == ["a", "b"]
    assert body[0]["timestamp"] == "2026-11-20T08:30:00Z"
    assert {e["namespace"] for e in body} == {"ns1"}


def test_store_fields(client: TotalRecallClient, fake: Recorder) -> None:
    res = client.store("User prefers tabs", "Said so twice", category="user_pattern",
                       tags=["editor"], metadata={"confidence": 0.9}, id="pref-tabs")
    assert res.ids == ["id0"]
    assert fake.requests[0].url.path == "/memory/store"
    assert fake.body() == {"summary": "User prefers tabs", "detail": "Said so twice",
                           "category": "user_pattern", "tags": ["editor"],
                           "metadata": {"confidence": 0.9}, "id": "pref-tabs"}


def test_every_other_endpoint(client: TotalRecallClient, fake: Recorder) -> None:
    assert client.timeline(hours=24, category="error", limit=10).memories[0].id == "k1"
    assert fake.body() == {"hours": 24, "category": "error", "namespace": "default", "limit": 10}
    h = client.health()
    assert h.ok and h.status == "ok" and h.get("nats") == "ok"
    assert client.stats().get("total") == 3
    assert client.compact().get("status") == "started"
    assert client.rebuild(tiers=["hot"]).get("status") == "started"
    assert fake.body() == {"tiers": ["hot"]}
    f = client.file("memory/daily/2026-11-22.md")
    assert f.text == "" and f.path == "memory/daily/2026-11-22.md"
    assert fake.body() == {"path": "memory/daily/2026-11-22.md", "namespace": "default"}
    client.file("MEMORY.md", namespace="ops")
    assert fake.body() == {"path": "MEMORY.md", "namespace": "ops"}
    fl = client.flush([{"role": "user", "content": "hi"}], "sess-1")
    assert fl.get("stored") == 1
    assert fake.body() == {"messages": [{"role": "user", "content": "hi"}], "sessionId": "sess-1"}
    assert client.warm("sess-1").get("warmed") == 5
    assert fake.body() == {"sessionId": "sess-1"}
    assert "x 1" in client.metrics()
    paths = [(r.method, r.url.path) for r in fake.requests]
    assert ("GET", "/memory/health") in paths and ("GET", "/memory/stats") in paths


def test_forget_by_ids_in_a_namespace(fake: Recorder) -> None:
    c = TotalRecallClient("http://tr.test", namespace="agent-a", transport=httpx.MockTransport(fake))
    r = c.forget(["m1", "m2"])
    assert r.forgotten == 1 and r.missing == ["m2"]
    assert fake.body() == {"ids": ["m1", "m2"], "namespace": "agent-a"}
    c.forget("m3", namespace="ops")
    assert fake.body() == {"ids": ["m3"], "namespace": "ops"}
    with pytest.raises(ValueError):  # validated before anything is sent
        c.forget([])
    assert len(fake.requests) == 2


async def test_async_forget(fake: Recorder) -> None:
    async with AsyncTotalRecallClient("http://tr.test", transport=httpx.MockTransport(fake)) as c:
        r = await c.forget(["m1"])
    assert r.forgotten == 0 and r.missing == ["m1"]
    assert fake.body() == {"ids": ["m1"], "namespace": "default"}


def test_health_503_is_an_answer_not_an_error() -> None:
    fake = Recorder(lambda r: httpx.Response(503, json={"status": "degraded", "pg": "down"}))
    c = TotalRecallClient("http://tr.test", transport=httpx.MockTransport(fake))
    h = c.health()
    assert not h.ok and h.status == "degraded" and h.http_status == 503


@pytest.mark.parametrize(("status", "body", "exc", "reason"), [
    (422, {"detail": [{"loc": ["body", "timeframe"], "msg": "Input should be 'auto'",
                       "type": "literal_error"}]}, TotalRecallBadRequest,
     "timeframe: Input should be 'auto'"),
    (400, {"detail": "namespace 'x y' is invalid"}, TotalRecallBadRequest,
     "namespace 'x y' is invalid"),
    (401, {"detail": "missing bearer token"}, TotalRecallAuthError, "missing bearer token"),
    (404, {"detail": "Not Found"}, TotalRecallNotFound, "Not Found"),
    (500, "boom: Internal Server Error", TotalRecallServerError, "boom: Internal Server Error"),
    (503, {"detail": "embedder not ready"}, TotalRecallServerError, "embedder not ready"),
])
def test_errors_carry_the_servers_reason(status: int, body: Any, exc: type[Exception],
                                         reason: str) -> None:
    def answer(_: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        return httpx.Response(status, json=body)

    c = TotalRecallClient("http://tr.test", transport=httpx.MockTransport(Recorder(answer)))
    with pytest.raises(exc) as info:
        c.recall("q")
    err = info.value
    assert isinstance(err, TotalRecallError)
    assert err.status_code == status and err.reason == reason  # type: ignore[attr-defined]
    assert reason in str(err) and "/memory/recall" in str(err)


def test_transport_errors_are_wrapped() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(TotalRecallConnectionError, match="ConnectError"):
        TotalRecallClient("http://tr.test", transport=httpx.MockTransport(refuse)).stats()
    with pytest.raises(TotalRecallTimeout):
        TotalRecallClient("http://tr.test", transport=httpx.MockTransport(slow)).recall("q")


def test_unexpected_answer_is_a_clear_error() -> None:
    fake = Recorder(lambda r: httpx.Response(200, json={"nope": True}))
    c = TotalRecallClient("http://tr.test", transport=httpx.MockTransport(fake))
    with pytest.raises(TotalRecallError, match="unexpected answer"):
        c.recall("q")


def test_timeouts_default_and_per_call(fake: Recorder) -> None:
    seen: list[dict[str, Any]] = []

    def record(request: httpx.Request) -> None:
        seen.append(request.extensions["timeout"])
        return None

    rec = Recorder(record)
    c = TotalRecallClient("http://tr.test", timeout=4.0, transport=httpx.MockTransport(rec))
    c.recall("q")
    c.recall("q", timeout=0.5)
    assert seen[0]["read"] == 4.0 and seen[0]["connect"] == 3.0
    assert seen[1]["read"] == 0.5


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOTALRECALL_API", "http://10.0.0.5:9999/")
    monkeypatch.setenv("TOTALRECALL_API_TOKEN", "tok")
    monkeypatch.setenv("TOTALRECALL_NAMESPACE", "claude")
    monkeypatch.setenv("TOTALRECALL_TIMEOUT", "2.5")
    c = TotalRecallClient.from_env()
    assert c.base_url == "http://10.0.0.5:9999" and c.token == "tok" and c.namespace == "claude"
    assert c.timeout.read == 2.5
    assert c.headers["Authorization"] == "Bearer tok"
    assert TotalRecallClient.from_env(namespace="other").namespace == "other"


async def test_async_client_mirrors_sync(fake: Recorder) -> None:
    async with AsyncTotalRecallClient("http://tr.test", token="t", namespace="a1",
                                      transport=httpx.MockTransport(fake)) as c:
        res = await c.recall("postgres", timeframe="all")
        assert res.memories[0].summary.startswith("postgresql")
        assert (await c.store("x")).ids == ["id0"]
        assert (await c.ingest([{"summary": "y"}])).accepted == 1
        assert (await c.timeline(1)).memories
        assert (await c.health()).ok
        assert (await c.stats()).get("total") == 3
        assert (await c.compact()).get("status") == "started"
        assert (await c.rebuild()).get("status") == "started"
        assert (await c.file("MEMORY.md")).text == ""
        assert (await c.flush(["m"], "s")).get("stored") == 1
        assert (await c.warm("s")).get("warmed") == 5
        assert "x 1" in await c.metrics()
    assert fake.body(0)["namespace"] == "a1"
    assert all(r.headers["authorization"] == "Bearer t" for r in fake.requests)
    assert fake.body(-3) == {"messages": ["m"], "sessionId": "s", "namespace": "a1"}


async def test_async_errors() -> None:
    fake = Recorder(lambda r: httpx.Response(403, json={"detail": "bad token"}))
    async with AsyncTotalRecallClient("http://tr.test",
                                      transport=httpx.MockTransport(fake)) as c:
        with pytest.raises(TotalRecallAuthError, match="bad token"):
            await c.recall("q")
