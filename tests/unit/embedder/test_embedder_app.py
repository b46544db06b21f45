"""The FastStream app with a fake backend on TestNatsBroker (no network), RPC, fallback."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
from embedder_fakes import FakeBackend
from faststream.nats import TestNatsBroker
from totalrecall_embedder.app import create_app
from totalrecall_embedder.core.backend import LlamaBackend, ModelUnavailable, model_fingerprint
from totalrecall_embedder.core.engine import Engine, EngineConfig
from totalrecall_embedder.handlers import handle_batch_rpc, handle_query_rpc
from totalrecall_embedder.metrics import Metrics
from totalrecall_embedder.settings import Settings
from totalrecall_schema import EmbedReply, EmbedRequest, Topology

TOPO = Topology.for_test("unitapp")


def settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(subject_prefix=TOPO.prefix, stream_prefix=TOPO.stream_prefix,
                    home=tmp_path, **kw)


async def test_query_rpc_and_batch_rpc_use_their_own_contexts(tmp_path: Path) -> None:
    query = FakeBackend(dim=4, fingerprint="q:1")
    ingest = FakeBackend(dim=4, fingerprint="q:1")
    app = create_app(settings(tmp_path), embedder_backend=ingest, query_backend=query)
    # the query RPC's responder thread calls this handler (real NATS: the integration tests)
    rep = handle_query_rpc(EmbedRequest(texts=["hi", "there"]).model_dump_json().encode(),
                           app.engine, app.metrics)
    async with TestNatsBroker(app.broker) as br:
        resp2 = await br.request(EmbedRequest(texts=["doc"], kind="document")
                                 .model_dump_json().encode(), TOPO.rpc_embed_batch)
        rep2 = EmbedReply.model_validate_json(resp2.body)
    assert rep.error is None and rep.dim == 4 and rep.model == "q:1" and len(rep.vectors or []) == 2
    assert query.calls == [["hi", "there"]] and ingest.calls == [["doc"]]  # separate contexts
    assert rep2.vectors is not None and len(rep2.vectors) == 1


async def test_rpc_without_model_and_with_bad_request(tmp_path: Path) -> None:
    eng = Engine(EngineConfig(model_path=tmp_path / "none.gguf", model_retry_s=3600))
    assert await eng.load() is False and eng.error and "not found" in eng.error
    m = Metrics()
    rep = await handle_batch_rpc(b'{"texts": ["x"]}', eng, m)
    assert rep.vectors is None and rep.error and "unavailable" in rep.error
    rep = await handle_batch_rpc(b'{"texts": "nope"}', eng, m)
    assert rep.error and rep.error.startswith("invalid EmbedRequest")
    rep = handle_query_rpc(b'{"texts": ["x"]}', eng, m)  # the responder thread's path
    assert rep.vectors is None and rep.error and "unavailable" in rep.error
    rep = handle_query_rpc(b'not json', eng, m)
    assert rep.error and rep.error.startswith("invalid EmbedRequest")


async def test_batch_rpc_is_chunked(tmp_path: Path) -> None:
    backend = FakeBackend()
    eng = Engine(EngineConfig(model_path=tmp_path / "x", rpc_batch_chunk=3), backend=backend)
    rep = await handle_batch_rpc(EmbedRequest(texts=[str(i) for i in range(7)])
                                 .model_dump_json().encode(), eng, Metrics())
    assert [len(c) for c in backend.calls] == [3, 3, 1] and len(rep.vectors or []) == 7


async def test_health_and_metrics_routes(tmp_path: Path) -> None:
    app = create_app(settings(tmp_path), embedder_backend=FakeBackend())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        health = await client.get("/health")  # not started: 503
        metrics = await client.get("/metrics")
    assert health.status_code == 503 and json.loads(health.content)["status"] == "starting"
    assert metrics.status_code == 200
    assert "totalrecall_embedder_batch_size" in metrics.text
    assert "totalrecall_embedder_fallback_state" in metrics.text


async def test_several_apps_in_one_process(tmp_path: Path) -> None:
    a = create_app(settings(tmp_path), embedder_backend=FakeBackend())
    b = create_app(settings(tmp_path), embedder_backend=FakeBackend())
    assert a.metrics.registry is not b.metrics.registry


def test_missing_or_broken_model_is_unavailable(tmp_path: Path) -> None:
    try:
        LlamaBackend(tmp_path / "absent.gguf")
    except ModelUnavailable as exc:
        assert "not found" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected ModelUnavailable")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF but not really")
    try:
        LlamaBackend(broken)
    except ModelUnavailable as exc:
        assert "cannot load" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected ModelUnavailable")


def test_fingerprint_is_cached_next_to_the_model(tmp_path: Path) -> None:
    model = tmp_path / "tiny.f16.gguf"
    model.write_bytes(b"abc")
    fp = model_fingerprint(model)
    assert fp == "tiny.f16:ba7816bf8f01"  # sha256("abc")
    cache = tmp_path / "tiny.f16.gguf.sha256"
    assert cache.read_text().startswith("ba7816bf8f01")
    cache.write_text("f" * 64 + "  tiny.f16.gguf\n")  # a cached value newer than the model wins
    assert model_fingerprint(model) == "tiny.f16:ffffffffffff"
    os.utime(cache, (1, 1))  # older than the model: recomputed
    assert model_fingerprint(model) == fp
