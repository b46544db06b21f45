"""Batch planning and the event-batch handler (fakes only)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from embedder_fakes import FakeBackend, FakeMsg, FakePublisher
from totalrecall_embedder.core.batch import Incoming, plan_batch
from totalrecall_embedder.core.dedup import DedupWindow, TemplateVectors
from totalrecall_embedder.core.engine import Engine, EngineConfig
from totalrecall_embedder.handlers import handle_event_batch
from totalrecall_embedder.metrics import Metrics
from totalrecall_schema import DeadLetter, EmbeddedEvent, MemoryEvent, Topology

TOPO = Topology.for_test("unitemb")
T0 = datetime.now(UTC) - timedelta(minutes=1)


def ev(i: int, summary: str, *, cat: str = "error", ns: str = "default",
       dt: float = 0.0) -> MemoryEvent:
    return MemoryEvent(id=f"e{i}", namespace=ns, category=cat, summary=summary,
                       timestamp=T0 + timedelta(seconds=dt))


def inc(e: MemoryEvent) -> Incoming:
    return Incoming(TOPO.events_subject(e.category), e.model_dump_json().encode())


def msg(e: MemoryEvent) -> FakeMsg:
    return FakeMsg(TOPO.events_subject(e.category), e.model_dump_json().encode())


def engine(backend: FakeBackend | None = None, *, dedup: bool = True,
           model: Path = Path("/nonexistent.gguf")) -> Engine:
    return Engine(EngineConfig(model_path=model, dedup_enabled=dedup, model_retry_s=3600),
                  backend=backend)


# --- planning ---------------------------------------------------------------------------------
def test_invalid_payloads_become_dead_letters() -> None:
    plan = plan_batch([Incoming("p.events.error", b"{nope"),
                       Incoming("p.events.error", json.dumps({"summary": "x",
                                                              "category": "bogus"}).encode()),
                       inc(ev(1, "fine"))], DedupWindow())
    assert [i for i, _ in plan.dead] == [0, 1]
    assert "invalid MemoryEvent" in plan.dead[1][1].reason and "bogus" in plan.dead[1][1].reason
    assert plan.dead[0][1].payload == "{nope" and plan.dead[0][1].stage == "embedder"
    assert plan.texts == ["fine"]


def test_repeats_in_one_batch_are_embedded_once() -> None:
    es = [ev(1, "pid 12 crashed at 10:00:00", dt=0), ev(2, "pid 12 crashed at 10:00:05", dt=5),
          ev(3, "pid 12 crashed at 10:00:03", dt=3), ev(4, "pid 12 crashed", cat="security"),
          ev(5, "pid 12 crashed", ns="other")]
    plan = plan_batch([inc(e) for e in es], DedupWindow())
    assert len(plan.texts) == 3 and plan.folded == 2  # category and namespace separate
    out = plan.finish([[1.0]] * 3, "m:1", TOPO)
    first = out[0]
    assert first.sources == [0, 1, 2] and first.msg_id == es[0].key
    assert first.embedded.event.id == "e1" and first.embedded.repeat_count == 3
    assert first.embedded.last_seen == es[1].timestamp and first.folded == 2
    assert [o.kind for o in out] == ["embedded"] * 3


def test_a_later_repeat_republishes_the_first_memory_with_a_new_msg_id() -> None:
    w = DedupWindow()
    p1 = plan_batch([inc(ev(1, "disk full (checked 10:00:00)"))], w)
    (o1,) = p1.finish([[0.6, 0.8]], "m:1", TOPO)
    w.put(o1.dkey, o1.to_seen())  # committed after its PubAck
    p2 = plan_batch([inc(ev(2, "disk full (checked 10:01:00)", dt=60)),
                     inc(ev(3, "disk full (checked 10:01:30)", dt=90))], w)
    assert p2.texts == [] and p2.folded == 2  # not re-embedded
    (o2,) = p2.finish(None, None, TOPO)
    assert o2.kind == "repeat" and o2.sources == [0, 1]
    assert o2.embedded.event.id == "e1" and o2.embedded.vector == [0.6, 0.8]
    assert o2.embedded.repeat_count == 3 and o2.msg_id == f"{o1.embedded.event.key}:r3"
    assert o2.embedded.model == "m:1"
    # outside the window it is a new memory
    w.put(o2.dkey, o2.to_seen())
    p3 = plan_batch([inc(ev(4, "disk full (checked 10:06:40)", dt=400))], w)
    assert p3.texts == ["disk full (checked 10:06:40)"]


def test_redelivery_is_settled_without_counting() -> None:
    w = DedupWindow()
    e1 = ev(1, "same thing")
    (o1,) = plan_batch([inc(e1)], w).finish([[1.0]], "m:1", TOPO)
    w.put(o1.dkey, o1.to_seen())
    (o2,) = plan_batch([inc(e1)], w).finish(None, None, TOPO)
    assert o2.embedded.repeat_count == 1 and o2.msg_id == o1.msg_id and o2.folded == 0


def test_memory_published_without_vector_is_embedded_once_a_model_is_back() -> None:
    w = DedupWindow()
    (o1,) = plan_batch([inc(ev(1, "x happened"))], w, can_embed=False).finish(None, None, TOPO)
    assert o1.kind == "fallback" and o1.embedded.vector is None and o1.embedded.model is None
    w.put(o1.dkey, o1.to_seen())
    p = plan_batch([inc(ev(2, "x happened", dt=1))], w, can_embed=True)
    assert p.texts == ["x happened"]


def test_conversation_is_never_folded() -> None:
    es = [ev(1, "my server listens on port 8080", cat="conversation"),
          ev(2, "my server listens on port 8081", cat="conversation")]
    plan = plan_batch([inc(e) for e in es], DedupWindow(), skip_categories={"conversation"})
    assert len(plan.texts) == 2 and plan.folded == 0
    assert all(o.dkey is None for o in plan.finish([[1.0], [1.0]], "m", TOPO))


def test_events_differing_in_an_identifier_are_kept_apart() -> None:
    """Nothing an operator asks about is folded away: each block id stays a memory."""
    es = [ev(i, f"PacketResponder 1 for block blk_{b} terminating", dt=i)
          for i, b in enumerate(["38865049064139660", "-6952295868487656571", "42"])]
    plan = plan_batch([inc(e) for e in es], DedupWindow())
    assert plan.folded == 0
    out = plan.finish([[1.0]] * len(plan.texts), "m:1", TOPO)
    assert [o.embedded.event.id for o in out] == [e.id for e in es]
    assert all(o.embedded.repeat_count == 1 for o in out)


def test_events_of_one_template_share_one_embedding() -> None:
    t = TemplateVectors()
    es = [ev(1, "Failed password for root from 10.0.0.1 port 22"),
          ev(2, "Failed password for root from 10.0.0.2 port 22"),
          ev(3, "Invalid user admin from 10.0.0.3")]
    plan = plan_batch([inc(e) for e in es], DedupWindow(), templates=t, model="m:1")
    assert plan.texts == [es[0].summary, es[2].summary] and plan.reused == 1
    out = plan.finish([[0.6, 0.8], [1.0, 0.0]], "m:1", TOPO)
    assert [o.embedded.vector for o in out] == [[0.6, 0.8], [0.6, 0.8], [1.0, 0.0]]
    assert [o.embedded.event.summary for o in out] == [e.summary for e in es]
    # a later batch reuses the template's vector (same model only)
    e4 = ev(4, "Failed password for root from 10.9.9.9 port 2222", dt=1)
    later = plan_batch([inc(e4)], DedupWindow(), templates=t, model="m:1")
    assert later.texts == []
    (o4,) = later.finish(None, "m:1", TOPO)
    assert (o4.kind, o4.embedded.vector, o4.embedded.model) == ("reused", [0.6, 0.8], "m:1")
    assert o4.embedded.event.summary == e4.summary
    other_model = plan_batch([inc(e4)], DedupWindow(), templates=t, model="m:2")
    assert other_model.texts == [e4.summary]
    # no model now: nothing reused, the memory goes out without a vector (backfilled later)
    degraded = plan_batch([inc(e4)], DedupWindow(), templates=t, model="m:1", can_embed=False)
    assert degraded.reused == 0


def test_conversation_never_shares_an_embedding() -> None:
    es = [ev(1, "my server listens on port 8080", cat="conversation"),
          ev(2, "my server listens on port 8081", cat="conversation")]
    plan = plan_batch([inc(e) for e in es], DedupWindow(), skip_categories={"conversation"},
                      templates=TemplateVectors(), model="m")
    assert len(plan.texts) == 2 and plan.reused == 0


def test_dedup_disabled_embeds_everything() -> None:
    plan = plan_batch([inc(ev(1, "a")), inc(ev(2, "a"))], None)
    assert plan.texts == ["a", "a"] and plan.folded == 0


# --- the handler ------------------------------------------------------------------------------
async def test_handler_publishes_then_acks_and_dead_letters() -> None:
    backend = FakeBackend()
    eng, metrics, pub = engine(backend), Metrics(), FakePublisher()
    msgs = [msg(ev(1, "alpha at 10:00:01")), FakeMsg("x.events.error", b"garbage"),
            msg(ev(2, "alpha at 10:00:02")),
            msg(ev(3, "beta"))]
    counts = await handle_event_batch(msgs, eng, metrics, TOPO, pub)
    assert counts == {"published": 2, "dead": 1, "folded": 1, "retry": 0}
    assert all(m.acked for m in msgs)
    assert backend.calls == [["alpha at 10:00:01", "beta"]]  # one batched call, repeat not embedded
    emb = [(s, EmbeddedEvent.model_validate_json(p), h, st) for s, p, h, st in pub.sent
           if st == TOPO.embedded_stream]
    assert {e.event.id for _, e, _, _ in emb} == {"e1", "e3"}
    for subject, e, headers, _ in emb:
        assert subject == TOPO.embedded_subject("error")
        assert headers["Nats-Msg-Id"] == e.event.key
        assert e.model == "fake:000000000000" and e.dim == 8
    dl = [DeadLetter.model_validate_json(p) for s, p, _, st in pub.sent if st == TOPO.dlq_stream]
    assert len(dl) == 1 and dl[0].payload == "garbage"
    assert metrics.dedup_dropped._value.get() == 1
    assert metrics.events_out.labels(kind="embedded")._value.get() == 2


async def test_failed_publish_naks_instead_of_acking() -> None:
    eng, pub = engine(FakeBackend()), FakePublisher(fail_subjects=[TOPO.embedded_subject("error")])
    m1, m2 = msg(ev(1, "one")), msg(ev(2, "two", cat="security"))
    counts = await handle_event_batch([m1, m2], eng, Metrics(), TOPO, pub, retry_delay=0.5)
    assert counts["retry"] == 1 and counts["published"] == 1
    assert m1.naked == 0.5 and not m1.acked
    assert m2.acked and not m2.naked
    assert len(eng.window or []) == 1  # only the published one is remembered


async def test_failed_dead_letter_publish_naks() -> None:
    pub = FakePublisher(fail_subjects=[TOPO.dlq_subject("embedder")])
    bad = FakeMsg("x", b"[]")
    await handle_event_batch([bad], engine(FakeBackend()), Metrics(), TOPO, pub)
    assert bad.naked and not bad.acked


async def test_no_model_means_events_flow_without_vectors() -> None:
    eng, metrics, pub = engine(None), Metrics(), FakePublisher()
    m = msg(ev(1, "hello"))
    await handle_event_batch([m], eng, metrics, TOPO, pub)
    (sent,) = pub.sent
    e = EmbeddedEvent.model_validate_json(sent[1])
    assert e.vector is None and e.model is None and e.dim is None and m.acked
    assert metrics.fallback_state._value.get() == 1
    assert metrics.events_out.labels(kind="fallback")._value.get() == 1


async def test_a_text_the_model_fails_on_gets_no_vector_but_others_do() -> None:
    eng, pub = engine(FakeBackend(fail_on="poison"), dedup=False), FakePublisher()
    msgs = [msg(ev(1, "fine text")), msg(ev(2, "poison text"))]
    await handle_event_batch(msgs, eng, Metrics(), TOPO, pub)
    got = {EmbeddedEvent.model_validate_json(p).event.id: EmbeddedEvent.model_validate_json(p)
           for _, p, _, _ in pub.sent}
    assert got["e1"].vector is not None and got["e2"].vector is None
    assert all(m.acked for m in msgs)


@pytest.mark.parametrize("n", [0])
async def test_empty_batch_is_a_no_op(n: int) -> None:
    assert (await handle_event_batch([], engine(FakeBackend()), Metrics(), TOPO,
                                     FakePublisher()))["published"] == n
