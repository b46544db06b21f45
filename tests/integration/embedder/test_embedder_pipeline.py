"""The embedder against a real nats-server and the real GGUF model."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from totalrecall_embedder.app import create_app
from totalrecall_embedder.settings import Settings
from totalrecall_schema import (
    DeadLetter,
    EmbeddedEvent,
    EmbedReply,
    EmbedRequest,
    MemoryEvent,
    Topology,
)
from waiting import request_served
from waiting import wait_for as _wait_for

DIM = 384


# The embedder's waits default to 30 s (a model load and a batch on a busy CPU).
wait_for = functools.partial(_wait_for, timeout=30.0)


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


class Collector:
    """Reads a stream with its own durable pull consumer."""

    def __init__(self, nc: Any, topology: Topology, stream: str, subject: str) -> None:
        self.js = nc.jetstream()
        self.topology, self.stream, self.subject = topology, stream, subject
        self.msgs: list[Any] = []
        self._sub: Any = None

    async def _ensure(self) -> Any:
        if self._sub is None:
            self._sub = await self.js.pull_subscribe(
                self.subject, durable="test-collector", stream=self.stream,
                config=ConsumerConfig(durable_name="test-collector",
                                      ack_policy=AckPolicy.EXPLICIT,
                                      deliver_policy=DeliverPolicy.ALL))
        return self._sub

    async def poll(self) -> list[Any]:
        sub = await self._ensure()
        try:
            got = await sub.fetch(100, timeout=0.2)
        except (TimeoutError, nats.errors.TimeoutError):
            got = []
        for m in got:
            await m.ack()
        self.msgs.extend(got)
        return self.msgs

    async def wait(self, n: int, timeout: float = 30.0) -> list[Any]:
        async def enough() -> bool:
            return len(await self.poll()) >= n
        await wait_for(enough, timeout=timeout, what=f"{n} messages on {self.stream}")
        return self.msgs


async def publish_events(nc: Any, topology: Topology, events: list[MemoryEvent]) -> None:
    js = nc.jetstream()
    for ev in events:
        await js.publish(topology.events_subject(ev.category), ev.model_dump_json().encode(),
                         headers={"Nats-Msg-Id": ev.key})


@asynccontextmanager
async def running(settings: Settings, **kw: Any) -> AsyncIterator[Any]:
    app = create_app(settings, **kw)
    async with app:
        yield app


async def consumer_settled(nc: Any, topology: Topology) -> bool:
    info = await nc.jetstream().consumer_info(topology.events_stream, topology.embedder_durable)
    return info.num_pending == 0 and info.num_ack_pending == 0


async def test_events_are_embedded_published_and_acked(settings: Settings, nc: Any,
                                                       topology: Topology) -> None:
    now = datetime.now(UTC)
    settings = settings.model_copy(update={"dedup_enabled": False})  # texts differ by numbers
    events = [MemoryEvent(id=f"e{i}", category="system.process", summary=f"memory {i}: {s}",
                          timestamp=now - timedelta(seconds=i))
              for i, s in enumerate(["Chrome is using 3.8GB of RAM and swap is at 94%",
                                     "nginx failed to start: port 80 already in use",
                                     "The user prefers dark mode in every editor",
                                     "Backup of /home finished in 12 minutes"] * 5)]
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    async with running(settings) as app:
        await publish_events(nc, topology, events)
        msgs = await out.wait(len(events))
        await wait_for(lambda: consumer_settled(nc, topology), what="all events acked")
        assert app.engine.available
    got = {EmbeddedEvent.model_validate_json(m.data).event.id: m for m in msgs}
    assert set(got) == {e.id for e in events}
    for ev in events:
        m = got[ev.id]
        emb = EmbeddedEvent.model_validate_json(m.data)
        assert m.subject == topology.embedded_subject("system.process")
        assert m.headers["Nats-Msg-Id"] == ev.key
        assert emb.dim == DIM and emb.vector is not None and len(emb.vector) == DIM
        assert math.isclose(math.sqrt(sum(x * x for x in emb.vector)), 1.0, abs_tol=1e-3)
        assert emb.model is not None and emb.model.startswith(model_stem(settings) + ":")
        assert emb.repeat_count == 1
    # identical texts get (numerically) identical vectors, different ones do not
    v0 = EmbeddedEvent.model_validate_json(got["e0"].data).vector
    v4 = EmbeddedEvent.model_validate_json(got["e4"].data).vector
    v1 = EmbeddedEvent.model_validate_json(got["e1"].data).vector
    assert v0 and v4 and v1
    assert cos(v0, v4) > 0.9  # "memory 0: Chrome…" vs "memory 4: Chrome…"
    assert cos(v0, v1) < cos(v0, v4)


def model_stem(settings: Settings) -> str:
    return settings.resolved_model_path.stem


async def test_query_rpc_and_batch_rpc(settings: Settings, nc: Any,
                                       topology: Topology) -> None:
    async with running(settings) as app:
        req = EmbedRequest(texts=["Why is my system slow?",
                                  "Chrome is using 3.8GB of RAM and swap is at 94%",
                                  "I prefer tabs over spaces and dark themes in my editor"])
        msg = await request_served(nc, topology.rpc_embed_query,
                                   req.model_dump_json().encode())
        rep = EmbedReply.model_validate_json(msg.data)
        assert rep.error is None and rep.vectors is not None and rep.dim == DIM
        q, rel, unrel = rep.vectors
        assert 0.3 < cos(q, rel) < 0.55 and cos(q, unrel) < 0.2  # embedding.md: 0.41 / 0.01
        assert rep.model and rep.model.startswith(model_stem(settings) + ":")

        batch = EmbedRequest(texts=[f"document {i}" for i in range(150)], kind="document")
        msg = await nc.request(topology.rpc_embed_batch, batch.model_dump_json().encode(),
                               timeout=60)
        rep2 = EmbedReply.model_validate_json(msg.data)
        assert rep2.error is None and rep2.vectors is not None and len(rep2.vectors) == 150
        # the same text gives the same vector through both contexts
        msg = await nc.request(topology.rpc_embed_batch,
                               EmbedRequest(texts=["Why is my system slow?"]).model_dump_json()
                               .encode(), timeout=30)
        rep3 = EmbedReply.model_validate_json(msg.data)
        assert rep3.vectors is not None and cos(rep3.vectors[0], q) > 0.9999

        bad = await nc.request(topology.rpc_embed_query, b'{"texts": []}', timeout=10)
        assert "invalid EmbedRequest" in (EmbedReply.model_validate_json(bad.data).error or "")

        # the query path runs on its own connection: visible in health and metrics
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as client:
            health = (await client.get("/health")).json()
            metrics = (await client.get("/metrics")).text
        assert health["query_rpc"] is True
        assert "totalrecall_embedder_query_rpc_up 1.0" in metrics
    assert not app.query_responder.connected  # stopped with the app


async def test_invalid_payload_goes_to_the_dlq_and_is_acked(settings: Settings, nc: Any,
                                                           topology: Topology) -> None:
    dlq = Collector(nc, topology, topology.dlq_stream, topology.dlq_all)
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    good = MemoryEvent(id="good-1", category="error", summary="disk /dev/sda1 is full")
    async with running(settings):
        js = nc.jetstream()
        await js.publish(topology.events_subject("error"), b"not json at all")
        await js.publish(topology.events_subject("error"), b'{"summary": ""}')
        await publish_events(nc, topology, [good])
        dead = await dlq.wait(2)
        await out.wait(1)
        await wait_for(lambda: consumer_settled(nc, topology), what="all acked")
    letters = [DeadLetter.model_validate_json(m.data) for m in dead]
    assert {d.payload for d in letters} == {"not json at all", '{"summary": ""}'}
    assert all(d.stage == "embedder" and "invalid MemoryEvent" in d.reason for d in letters)
    assert all(m.subject == topology.dlq_subject("embedder") for m in dead)
    assert EmbeddedEvent.model_validate_json(out.msgs[0].data).event.id == "good-1"


async def test_repeats_are_folded_into_one_memory(settings: Settings, nc: Any,
                                                  topology: Topology) -> None:
    now = datetime.now(UTC)
    events = [MemoryEvent(id=f"oom-{i}", category="error",
                          summary=f"process 1000 killed by OOM at 10:00:0{i}",
                          timestamp=now + timedelta(seconds=i)) for i in range(3)]
    other = MemoryEvent(id="other", category="error", summary="certificate expires soon")
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    async with running(settings) as app:
        await publish_events(nc, topology, [events[0]])
        await out.wait(1)
        await publish_events(nc, topology, [*events[1:], other])
        await wait_for(lambda: consumer_settled(nc, topology), what="all acked")
        await out.poll()
        dropped = app.metrics.dedup_dropped._value.get()
    embs = [EmbeddedEvent.model_validate_json(m.data) for m in out.msgs]
    oom = [e for e in embs if e.event.id.startswith("oom")]
    assert {e.event.id for e in oom} == {"oom-0"}  # the first event's key every time
    assert max(e.repeat_count for e in oom) == 3
    last = max(oom, key=lambda e: e.repeat_count)
    assert last.last_seen == events[2].timestamp and last.vector is not None
    assert any(e.event.id == "other" for e in embs)
    assert dropped == 2


async def test_events_of_one_template_are_kept_apart_and_share_a_vector(
        settings: Settings, nc: Any, topology: Topology) -> None:
    """Lines that differ only in a block id are memories of their own (their ids are what an
    operator asks for); the model runs once for all of them."""
    now = datetime.now(UTC)
    blocks = ["38865049064139660", "-6952295868487656571", "-5623176793330377570"]
    events = [MemoryEvent(id=f"blk-{i}", category="system.service",
                          summary=f"PacketResponder 1 for block blk_{b} terminating",
                          timestamp=now + timedelta(seconds=i)) for i, b in enumerate(blocks)]
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    async with running(settings) as app:
        await publish_events(nc, topology, [events[0]])
        await out.wait(1)
        await publish_events(nc, topology, events[1:])
        await wait_for(lambda: consumer_settled(nc, topology), what="all acked")
        await out.poll()
        reused = app.metrics.vectors_reused._value.get()
        folded = app.metrics.dedup_dropped._value.get()
    embs = {e.event.id: e for e in (EmbeddedEvent.model_validate_json(m.data) for m in out.msgs)}
    assert set(embs) == {e.id for e in events} and folded == 0
    for e in events:
        assert embs[e.id].event.summary == e.summary and embs[e.id].repeat_count == 1
    assert embs["blk-1"].vector == embs["blk-0"].vector == embs["blk-2"].vector
    assert embs["blk-0"].vector is not None and reused == 2


async def test_without_a_model_events_flow_on_without_vectors(
        settings: Settings, nc: Any, topology: Topology, tmp_path: Path,
        model_path: Path) -> None:
    missing = tmp_path / "later.gguf"
    settings = settings.model_copy(update={"model_path": missing, "model_retry_s": 0.0})
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    ev = MemoryEvent(id="nomodel", category="conversation", summary="hello without a model")
    async with running(settings) as app:
        assert not app.engine.available
        await publish_events(nc, topology, [ev])
        msgs = await out.wait(1)
        await wait_for(lambda: consumer_settled(nc, topology), what="acked")
        rep = EmbedReply.model_validate_json(
            (await request_served(nc, topology.rpc_embed_query,
                                  EmbedRequest(texts=["x"]).model_dump_json().encode(),
                                  timeout=10)).data)
        assert rep.error and "unavailable" in rep.error and rep.vectors is None
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            health = await client.get("/health")
            metrics = await client.get("/metrics")

            # the model appears (e.g. `totalrecall model build` finished): picked up without
            # a restart; the next event is embedded
            missing.symlink_to(model_path)
            later = MemoryEvent(id="withmodel", category="conversation", summary="hello again")
            await publish_events(nc, topology, [later])
            # the event, and the first one again with its vector (backfill, `<key>:backfill`)
            msgs = await out.wait(3)

            async def backfilled() -> Any:
                h = json.loads((await client.get("/health")).content)
                return h if h["backfill"]["pending"] == 0 else None
            health2 = await wait_for(backfilled, what="backfill journal empty")
    by_id = {m.headers["Nats-Msg-Id"]: EmbeddedEvent.model_validate_json(m.data) for m in msgs}
    emb = EmbeddedEvent.model_validate_json(msgs[0].data)
    assert emb.vector is None and emb.model is None and emb.event.id == "nomodel"
    assert health.status_code == 200
    body = json.loads(health.content)
    assert body["status"] == "degraded" and body["fallback"] is True
    assert body["device"] == "none" and body["backfill"]["pending"] == 1
    assert "totalrecall_embedder_fallback_state 1.0" in metrics.text
    assert 'totalrecall_embedder_device_info{device="none"} 1.0' in metrics.text
    emb2 = by_id[later.key]
    assert emb2.event.id == "withmodel" and emb2.vector is not None and len(emb2.vector) == DIM
    back = by_id[f"{ev.key}:backfill"]
    assert back.event.id == "nomodel" and back.vector is not None and len(back.vector) == DIM
    assert health2["status"] == "ok" and health2["fallback"] is False
    assert health2["device"] == "cpu" and health2["backfill"]["pending"] == 0
