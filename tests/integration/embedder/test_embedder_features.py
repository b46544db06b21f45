"""Device report, embedding cache, endpoint fallback, prefixes, backfill — against
a real nats-server and the real GGUF (and a real tiny HTTP embeddings server)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from test_embedder_pipeline import (
    DIM,
    Collector,
    consumer_settled,
    cos,
    publish_events,
    running,
    wait_for,
)
from totalrecall_embedder.core.backend import LlamaBackend, tail_tokens
from totalrecall_embedder.settings import Settings
from totalrecall_schema import EmbeddedEvent, EmbedReply, EmbedRequest, MemoryEvent, Topology
from waiting import request_served


async def get_json(app: Any, path: str) -> Any:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://t") as client:
        r = await client.get(path)
        return r.json() if path == "/health" else r.text


async def rpc(nc: Any, subject: str, texts: list[str], kind: str = "query") -> EmbedReply:
    payload = EmbedRequest(texts=texts, kind=kind).model_dump_json().encode()  # type: ignore[arg-type]
    msg = await request_served(nc, subject, payload)
    return EmbedReply.model_validate_json(msg.data)


def counter(metrics: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in metrics.splitlines():
        if line.startswith(f"{name}{{{want}}}") or (not labels and line.startswith(name + " ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# --- device -----------------------------------------------------------------------------------
async def test_cpu_device_is_reported(settings: Settings, nc: Any) -> None:
    async with running(settings.model_copy(update={"device": "auto"})) as app:
        health = await get_json(app, "/health")
        metrics = await get_json(app, "/metrics")
    assert health["status"] == "ok" and health["device"] == "cpu"
    assert "no GPU offload" in health["device_reason"]  # this llama.cpp build has none
    assert "AVX" in health["cpu_features"] or "NEON" in health["cpu_features"]  # what it was built for
    assert health["batch_max"] == settings.batch_max and health["dim"] == DIM
    assert counter(metrics, "totalrecall_embedder_device_info", device="cpu") == 1.0
    assert counter(metrics, "totalrecall_embedder_device_info", device="gpu") == 0.0
    assert counter(metrics, "totalrecall_embedder_fallback_state") == 0.0  # CPU as expected


def test_gpu_style_packing_matches_the_cpu_path(model_path: Path) -> None:
    """n_batch > n_ctx (what the GPU path uses): many texts per decode, each still cut to n_ctx
    tokens — same vectors as the default context."""
    base = LlamaBackend(model_path, n_ctx=256)
    big = LlamaBackend(model_path, n_ctx=256, n_batch=1024)
    try:
        long = " ".join(f"journal entry {i} mentions disk pressure" for i in range(120))
        texts = ["disk is full", long, "nginx failed to start", "the user prefers dark mode"] * 3
        a, b = base.embed(texts), big.embed(texts)
        sims = [cos(x, y) for x, y in zip(a, b, strict=True)]
        # Q8_0 matmuls round a little differently with other batch shapes (~1e-4), f16 ~1e-6
        assert min(s for i, s in enumerate(sims) if i % 4 != 1) > 0.9995
        assert min(sims) > 0.995  # the long text: cut by characters to 256 tokens
        assert big.count_tokens(big._fit(long)) <= 256
    finally:
        base.close()
        big.close()


# --- cache ------------------------------------------------------------------------------------
async def test_cache_survives_a_restart_and_serves_rebuilds(settings: Settings, nc: Any,
                                                          topology: Topology) -> None:
    # every text embedded (or read from the cache) for itself: no folding, no shared templates
    settings = settings.model_copy(update={"dedup_enabled": False,
                                           "template_vectors_enabled": False})
    docs = [f"rebuild document {i} about memory pressure" for i in range(40)]
    async with running(settings) as app:
        first = await rpc(nc, topology.rpc_embed_batch, docs, "document")
        m1 = await get_json(app, "/metrics")
    assert first.vectors is not None and len(first.vectors) == 40
    assert counter(m1, "totalrecall_embedder_cache_requests_total", cache="disk",
                   result="miss") == 40
    assert (settings.home / "cache" / "embeddings" / "embeddings.sqlite3").is_file()

    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    async with running(settings) as app:  # a new process-worth of state, same home
        again = await rpc(nc, topology.rpc_embed_batch, docs, "document")
        # re-ingest: the same texts as events (new ids) are not re-embedded either
        await publish_events(nc, topology, [MemoryEvent(id=f"re-{i}", category="error",
                                                        summary=t)
                                            for i, t in enumerate(docs[:10])])
        msgs = await out.wait(10)
        m2 = await get_json(app, "/metrics")
        health = await get_json(app, "/health")
    assert again.vectors == first.vectors  # bit-identical from the cache
    assert counter(m2, "totalrecall_embedder_cache_requests_total", cache="disk",
                   result="hit") == 50
    assert counter(m2, "totalrecall_embedder_cache_requests_total", cache="disk",
                   result="miss") == 0
    assert health["cache"]["entries"] == 40
    by_text = dict(zip(docs, first.vectors, strict=True))
    for m in msgs:
        e = EmbeddedEvent.model_validate_json(m.data)
        assert e.vector == by_text[e.event.summary]


# --- endpoint fallback --------------------------------------------------------------------------
class _EmbeddingsServer(BaseHTTPRequestHandler):
    """An OpenAI-compatible POST /v1/embeddings: deterministic 16-dim vectors (not normalised,
    out of order, like some servers)."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).requests.append({"path": self.path, "body": body,
                                    "auth": self.headers.get("authorization")})
        if self.path != "/v1/embeddings":
            self.send_response(404)
            self.end_headers()
            return
        texts = body["input"]
        data = [{"object": "embedding", "index": i,
                 "embedding": [float((len(t) * (j + 1)) % 7 + 1) for j in range(16)]}
                for i, t in enumerate(texts)]
        payload = json.dumps({"object": "list", "data": data[::-1],
                              "model": body.get("model")}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def embeddings_server() -> Iterator[str]:
    _EmbeddingsServer.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsServer)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_endpoint_fallback_when_the_model_is_missing(
        settings: Settings, nc: Any, topology: Topology, tmp_path: Path,
        embeddings_server: str) -> None:
    settings = settings.model_copy(update={
        "model_path": tmp_path / "absent.gguf", "fallback_url": embeddings_server,
        "fallback_model": "text-embedding-test", "fallback_api_key": "sk-local-test"})
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    events = [MemoryEvent(id=f"r{i}", category="error", summary=s) for i, s in
              enumerate(["disk full", "a much longer summary about the network", "x y z"])]
    async with running(settings) as app:
        await publish_events(nc, topology, events)
        msgs = await out.wait(3)
        await wait_for(lambda: consumer_settled(nc, topology), what="acked")
        q = await rpc(nc, topology.rpc_embed_query, ["why slow"])
        health = await get_json(app, "/health")
        metrics = await get_json(app, "/metrics")
    got = {EmbeddedEvent.model_validate_json(m.data).event.id:
           EmbeddedEvent.model_validate_json(m.data) for m in msgs}
    for e in got.values():
        assert e.vector is not None and len(e.vector) == 16 and e.dim == 16
        assert math.isclose(math.sqrt(sum(x * x for x in e.vector)), 1.0, abs_tol=1e-6)
        assert e.model == "remote:text-embedding-test"
    assert got["r0"].vector != got["r1"].vector  # each its own, in order
    assert q.error is None and q.vectors and len(q.vectors[0]) == 16
    assert health["device"] == "remote" and health["status"] == "degraded"
    assert "absent.gguf" in health["device_reason"] and health["backfill"]["pending"] == 0
    assert counter(metrics, "totalrecall_embedder_fallback_state") == 3.0
    reqs = _EmbeddingsServer.requests
    assert all(r["path"] == "/v1/embeddings" for r in reqs)
    assert all(r["auth"] == "Bearer sk-local-test" for r in reqs)
    assert all(r["body"]["model"] == "text-embedding-test" for r in reqs)


# --- prefixes -------------------------------------------------------------------------------------
async def test_nomic_named_model_gets_search_prefixes(settings: Settings, nc: Any,
                                                      topology: Topology, tmp_path: Path,
                                                      model_path: Path) -> None:
    nomic = tmp_path / "nomic-embed-test.f16.gguf"  # MiniLM under a nomic name
    nomic.symlink_to(model_path)
    async with running(settings.model_copy(update={"model_path": nomic})) as app:
        q = await rpc(nc, topology.rpc_embed_query, ["why is my system slow"])
        health = await get_json(app, "/health")
    async with running(settings.model_copy(update={"query_prefix": ""})):
        plain = await rpc(nc, topology.rpc_embed_query,
                          ["search_query: why is my system slow", "why is my system slow"])
    assert health["query_prefix"] == "search_query: "
    assert health["document_prefix"] == "search_document: "
    assert q.vectors and plain.vectors
    assert cos(q.vectors[0], plain.vectors[0]) > 0.9999
    assert cos(q.vectors[0], plain.vectors[1]) < 0.99
    assert q.model and q.model.startswith("nomic-embed-test.f16:")  # fingerprint of the file


# --- long queries ---------------------------------------------------------------------------------
async def test_a_long_prompt_is_embedded_from_its_last_128_tokens(settings: Settings, nc: Any,
                                                                  topology: Topology,
                                                                  model_path: Path) -> None:
    """Automatic recall sends the agent's whole prompt: a pasted log, then the question. The
    query is embedded from its end (what the default model was trained on: 128 tokens), not
    from the log's first 256 tokens."""
    log = "\n".join(f"Nov 25 00:{i:02d}:13 host nginx[{1200 + i}]: connect() failed (111: "
                    f"Connection refused) while connecting to upstream, client: 10.0.0.{i}"
                    for i in range(40))
    prompt = f"Here is what the log says:\n{log}\nWhy does nginx keep failing since the update?"
    model = LlamaBackend(model_path)
    try:
        tail = tail_tokens(prompt, 128, model.count_tokens)
        assert model.count_tokens(prompt) > 256 and model.count_tokens(tail) <= 128
        assert tail.endswith("Why does nginx keep failing since the update?")
        head, whole_tail = model.embed([prompt, tail])  # the head: what a document gets
    finally:
        model.close()
    async with running(settings) as app:
        got = await rpc(nc, topology.rpc_embed_query, [prompt, "why does nginx fail?"])
        health = await get_json(app, "/health")
    assert got.vectors is not None and health["status"] == "ok"
    assert cos(got.vectors[0], whole_tail) > 0.9999  # the tail was embedded
    assert cos(got.vectors[0], head) < 0.99  # not the head
    async with running(settings.model_copy(update={"query_max_tokens": 0})):
        old = await rpc(nc, topology.rpc_embed_query, [prompt])
    assert old.vectors is not None and cos(old.vectors[0], head) > 0.9999  # 0: as before


async def test_an_exclusive_query_on_two_threads_gives_the_same_vector(settings: Settings, nc: Any,
                                                                       topology: Topology,
                                                                       model_path: Path) -> None:
    """Recall asks for a long prompt's embedding as exclusive; the embedder spreads it over two
    threads when nothing else runs, one otherwise: the vector is the same either way."""
    prompt = "My laptop got really slow an hour ago and the fans are loud. " * 3 + "What is it?"
    model = LlamaBackend(model_path)
    try:
        one, = model.embed([prompt])
        two, = model.embed_on([prompt], 2)
        again, = model.embed([prompt])  # the context is back on its own thread count
    finally:
        model.close()
    assert cos(one, two) > 0.9999 and cos(one, again) > 0.99999
    async with running(settings) as app:
        payload = EmbedRequest(texts=[prompt], kind="query", exclusive=True)
        msg = await request_served(nc, topology.rpc_embed_query, payload.model_dump_json().encode())
        got = EmbedReply.model_validate_json(msg.data)
        metrics = await get_json(app, "/metrics")
    assert got.vectors is not None and cos(got.vectors[0], one) > 0.9999
    spread = counter(metrics, "totalrecall_embedder_query_spread_total", outcome="spread")
    busy = counter(metrics, "totalrecall_embedder_query_spread_total", outcome="busy")
    assert spread + busy == 1  # which one depends on what else this machine runs right now


# --- backfill ---------------------------------------------------------------------------------
async def test_backfill_after_restart_with_the_model(settings: Settings, nc: Any,
                                                     topology: Topology, tmp_path: Path,
                                                     model_path: Path) -> None:
    """No model: events go out with vector=None and are journaled on disk. The embedder stops;
    the model appears; a new embedder republishes them with vectors (`<key>:backfill`)."""
    later = tmp_path / "later.gguf"
    settings = settings.model_copy(update={"model_path": later, "model_retry_s": 0.2,
                                           "backfill_interval_s": 0.2})
    now = datetime.now(UTC)
    events = [MemoryEvent(id=f"bf{i}", category="system.process", summary=s,
                          timestamp=now + timedelta(seconds=i))
              for i, s in enumerate(["backup of /home failed at 10:00:01: 3 files unreadable",
                                     # a repeat: only the time differs
                                     "backup of /home failed at 10:00:09: 3 files unreadable",
                                     "firefox crashed after the update",
                                     "user said: always use a dark theme"])]
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    async with running(settings) as app:
        await publish_events(nc, topology, events)
        await wait_for(lambda: consumer_settled(nc, topology), what="all acked")
        first = await out.poll()
        health = await get_json(app, "/health")
    assert all(EmbeddedEvent.model_validate_json(m.data).vector is None for m in first)
    assert health["backfill"] == {"pending": 3, "durable": True, "dropped": 0}
    assert (settings.home / "spool" / "embedder" / "backfill.sqlite3").is_file()

    later.symlink_to(model_path)
    async with running(settings) as app:
        async def backfilled() -> Any:
            await out.poll()
            ids = {m.headers["Nats-Msg-Id"] for m in out.msgs}
            return all(f"{e.key}:backfill" in ids for e in (events[0], *events[2:]))
        await wait_for(backfilled, what="3 backfilled memories")
        health2 = await wait_for(
            lambda: _pending_zero(app), what="journal empty")
    back = {m.headers["Nats-Msg-Id"]: EmbeddedEvent.model_validate_json(m.data)
            for m in out.msgs if m.headers["Nats-Msg-Id"].endswith(":backfill")}
    assert len(back) == 3
    b0 = back[f"{events[0].key}:backfill"]
    assert b0.vector is not None and len(b0.vector) == DIM and b0.model and b0.dim == DIM
    assert b0.repeat_count == 2 and b0.last_seen == events[1].timestamp  # as published before
    assert b0.model.startswith("later:")
    assert health2["device"] == "cpu"


async def _pending_zero(app: Any) -> Any:
    h = await get_json(app, "/health")
    return h if h["backfill"]["pending"] == 0 else None
