"""The backfill journal and handler, the retired technical vector, the endpoint backend (fakes only)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from embedder_fakes import FakeBackend, FakeMsg, FakePublisher
from totalrecall_embedder.adapters.backfill_journal import BackfillJournal
from totalrecall_embedder.adapters.remote import RemoteBackend, embeddings_url
from totalrecall_embedder.core.backend import ModelUnavailable
from totalrecall_embedder.core.engine import Engine, EngineConfig
from totalrecall_embedder.handlers import handle_backfill, handle_event_batch
from totalrecall_embedder.metrics import Metrics
from totalrecall_schema import EmbeddedEvent, MemoryEvent, Topology

TOPO = Topology.for_test("unitbf")
T0 = datetime.now(UTC) - timedelta(minutes=1)


def ev(i: int, summary: str, dt: float = 0.0) -> MemoryEvent:
    return MemoryEvent(id=f"e{i}", category="error", summary=summary,
                       timestamp=T0 + timedelta(seconds=dt))


def msg(e: MemoryEvent) -> FakeMsg:
    return FakeMsg(TOPO.events_subject(e.category), e.model_dump_json().encode())


def sent_by_id(pub: FakePublisher) -> dict[str, EmbeddedEvent]:
    return {h["Nats-Msg-Id"]: EmbeddedEvent.model_validate_json(p) for _, p, h, _ in pub.sent}


# --- journal -------------------------------------------------------------------------------
def test_journal_is_durable_and_versioned(tmp_path: Path) -> None:
    j = BackfillJournal(tmp_path / "bf.sqlite3")
    j.record([("k1", b"one"), ("k2", b"two")])
    (p1, p2) = j.take(10)
    assert (p1.key, p1.payload, p1.version) == ("k1", b"one", 1)
    j.record([("k1", b"one again")])  # updated while being backfilled
    assert j.done("k1", p1.version) is False and "k1" in j  # kept: the newer state wins
    assert j.done("k2", p2.version) and "k2" not in j
    j.close()
    j2 = BackfillJournal(tmp_path / "bf.sqlite3")  # survives a restart
    (p,) = j2.take(10)
    assert p.payload == b"one again" and p.version == 2 and len(j2) == 1
    for _ in range(3):
        j2.failed("k1", 2)
    assert j2.take(10, max_attempts=3) == [] and j2.waiting(3) == 0 and len(j2) == 1
    j2.record(remove=["k1"])
    assert len(j2) == 0


def test_journal_overflow_drops_the_oldest(tmp_path: Path) -> None:
    j = BackfillJournal(None, max_entries=3)
    for i in range(5):
        j.record([(f"k{i}", b"x")])
    assert len(j) == 3 and j.dropped == 2 and {p.key for p in j.take(10)} == {"k2", "k3", "k4"}


# --- handler + backfill ----------------------------------------------------------------------
def degraded_engine(tmp_path: Path) -> Engine:
    return Engine(EngineConfig(model_path=tmp_path / "none.gguf", model_retry_s=3600))


async def test_unembedded_memories_are_journaled_then_backfilled(tmp_path: Path) -> None:
    journal = BackfillJournal(tmp_path / "bf.sqlite3")
    eng, metrics, pub = degraded_engine(tmp_path), Metrics(), FakePublisher()
    e1, e2, e3 = ev(1, "disk full at 10:00:00"), ev(2, "disk full at 10:00:10", dt=10), ev(3, "other thing")
    msgs = [msg(e1), msg(e2), msg(e3)]
    await handle_event_batch(msgs, eng, metrics, TOPO, pub, journal=journal)
    assert all(m.acked for m in msgs) and {p.key for p in journal.take(10)} == {e1.key, e3.key}
    assert metrics.backfill_pending._value.get() == 2
    # nothing to do without a model
    assert await handle_backfill(eng, journal, metrics, TOPO, pub) == 0

    eng.ingest = eng.query = backend = FakeBackend()  # the model is back
    eng.device = "cpu"
    assert await handle_backfill(eng, journal, metrics, TOPO, pub) == 2
    got = sent_by_id(pub)
    b1 = got[f"{e1.key}:backfill"]
    assert b1.vector is not None and b1.model == backend.fingerprint and b1.dim == 8
    assert b1.repeat_count == 2 and b1.last_seen == e2.timestamp  # the memory as published
    assert got[f"{e3.key}:backfill"].vector is not None
    assert len(journal) == 0 and metrics.backfill_pending._value.get() == 0
    assert metrics.backfill_events.labels(outcome="embedded")._value.get() == 2
    # the dedup window now holds the vector: a later repeat folds into it, with its vector
    pub.sent.clear()
    await handle_event_batch([msg(ev(4, "disk full at 10:00:20", dt=20))], eng, metrics, TOPO, pub,
                             journal=journal)
    (rep,) = sent_by_id(pub).values()
    assert rep.event.key == e1.key and rep.repeat_count == 3 and rep.vector == b1.vector
    assert len(journal) == 0


async def test_a_vector_dropped_as_duplicate_stays_journaled(tmp_path: Path) -> None:
    """The source was redelivered after the model came back, but JetStream still remembered the
    vector-less message's id and dropped the one with the vector: the backfill must send it."""
    journal = BackfillJournal(None)
    eng, metrics, pub = degraded_engine(tmp_path), Metrics(), FakePublisher()
    e = ev(1, "hello")
    await handle_event_batch([msg(e)], eng, metrics, TOPO, pub, journal=journal)
    eng.ingest = eng.query = FakeBackend()
    eng.device = "cpu"
    eng.window = None  # a restarted embedder: nothing remembered
    await handle_event_batch([msg(e)], eng, metrics, TOPO, pub, journal=journal)
    assert e.key in journal  # the PubAck said duplicate
    await handle_backfill(eng, journal, metrics, TOPO, pub)
    assert sent_by_id(pub)[f"{e.key}:backfill"].vector is not None and len(journal) == 0


async def test_embedded_redelivery_clears_the_journal(tmp_path: Path) -> None:
    journal = BackfillJournal(None)
    journal.record([("somekey", b"{}")])
    e = ev(7, "x")
    journal.record([(e.key, b"{}")])
    pub = FakePublisher()
    eng = Engine(EngineConfig(model_path=tmp_path / "x"), backend=FakeBackend())
    await handle_event_batch([msg(e)], eng, Metrics(), TOPO, pub, journal=journal)
    assert e.key not in journal and "somekey" in journal


async def test_backfill_gives_up_after_max_attempts(tmp_path: Path) -> None:
    journal = BackfillJournal(None)
    eng, metrics, pub = degraded_engine(tmp_path), Metrics(), FakePublisher()
    await handle_event_batch([msg(ev(1, "poison pill"))], eng, metrics, TOPO, pub,
                             journal=journal)
    eng.ingest = eng.query = FakeBackend(fail_on="poison")
    for _ in range(3):
        await handle_backfill(eng, journal, metrics, TOPO, pub, max_attempts=2)
    assert len(journal) == 1 and journal.waiting(2) == 0
    assert metrics.backfill_events.labels(outcome="failed")._value.get() == 2


async def test_journal_write_failure_naks_unvectored_sources(tmp_path: Path) -> None:
    journal = BackfillJournal(None)
    journal.close()  # every write now fails
    m = msg(ev(1, "x"))
    counts = await handle_event_batch([m], degraded_engine(tmp_path), Metrics(), TOPO,
                                      FakePublisher(), retry_delay=0.1, journal=journal)
    assert m.naked == 0.1 and not m.acked and counts["retry"] == 1


# --- the retired technical vector --------------------------------------------------------------
async def test_events_carry_no_technical_vector_and_old_messages_still_decode(
        tmp_path: Path) -> None:
    eng = Engine(EngineConfig(model_path=tmp_path / "x"), backend=FakeBackend(dim=8))
    pub = FakePublisher()
    await handle_event_batch([msg(ev(1, "kernel oops in nvme driver"))], eng, Metrics(), TOPO,
                             pub)
    (e,) = sent_by_id(pub).values()
    raw = json.loads(e.model_dump_json())
    assert "technical_vector" not in raw and "technical_model" not in raw
    # a message of an older embedder (the field is retired) is still read, then dropped
    raw.update(technical_vector=[0.5] * 4, technical_model="tech:1")
    old = EmbeddedEvent.model_validate_json(json.dumps(raw))
    assert old.vector == e.vector and "technical_vector" not in old.model_dump_json()


# --- the endpoint backend (httpx MockTransport: no network) ----------------------------------
def test_embeddings_url() -> None:
    assert embeddings_url("http://h:8080") == "http://h:8080/v1/embeddings"
    assert embeddings_url("http://h/v1/") == "http://h/v1/embeddings"
    assert embeddings_url("http://h/api/embeddings") == "http://h/api/embeddings"


def test_remote_backend_posts_normalises_and_orders() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        texts = json.loads(req.content)["input"]
        data = [{"index": i, "embedding": [3.0, 4.0 + i]} for i in range(len(texts))]
        return httpx.Response(200, json={"data": list(reversed(data))})

    b = RemoteBackend("http://emb.local", model="text-embedding-3-small", api_key="sk-test",
                      chunk=2, transport=httpx.MockTransport(handler))
    assert b.dim == 2 and b.fingerprint == "remote:text-embedding-3-small"
    vecs = b.embed(["a", "b", "c"])
    assert vecs[0] == [0.6, 0.8] and abs(sum(x * x for x in vecs[2]) - 1) < 1e-6
    assert vecs[1] != vecs[0]  # ordered by "index", not by list position
    assert len(seen) == 3  # probe + two chunks
    body = json.loads(seen[1].content)
    assert body["model"] == "text-embedding-3-small" and body["input"] == ["a", "b"]
    assert seen[1].headers["authorization"] == "Bearer sk-test"
    assert str(seen[1].url) == "http://emb.local/v1/embeddings"


def test_remote_backend_unreachable_is_unavailable() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": "loading"})

    with pytest.raises(ModelUnavailable, match="unusable"):
        RemoteBackend("http://emb.local", transport=httpx.MockTransport(handler))
