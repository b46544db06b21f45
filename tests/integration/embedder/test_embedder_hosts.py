"""Remote hosts' subjects against a real nats-server: the embedder takes an event of
`<p>.host.<host>.events.<category>` only when it is that host's (a missing host is that host),
and dead-letters another host's with the reason; the local subjects stay trusted."""

from __future__ import annotations

import json
from typing import Any

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from test_embedder_pipeline import Collector, consumer_settled, running, wait_for
from totalrecall_embedder.settings import Settings
from totalrecall_schema import DeadLetter, EmbeddedEvent, MemoryEvent, Topology


def event_json(id_: str, summary: str, host: object = None) -> bytes:
    metadata: dict[str, Any] = {"severity": "error"}
    if host is not None:
        metadata["host"] = host
    return json.dumps({"id": id_, "category": "system.service", "summary": summary,
                       "metadata": metadata}).encode()


async def test_a_host_may_publish_only_its_own_events(settings: Settings, nc: Any,
                                                      topology: Topology) -> None:
    js = nc.jetstream()
    # An embedder durable of before host-scoped subjects (filter: the local events alone) is
    # given the remote hosts' subjects too, keeping its place.
    await js.add_consumer(topology.events_stream, ConsumerConfig(
        durable_name=topology.embedder_durable, ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL, filter_subject=topology.events_all))
    dlq = Collector(nc, topology, topology.dlq_stream, topology.dlq_all)
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    a_subject = topology.host_events_subject("db-01.lan", "system.service")
    sent = {
        "own": (a_subject, event_json("own", "postgresql failed on db-01", "DB-01.lan")),
        "unnamed": (a_subject, event_json("unnamed", "nginx failed to start")),
        "structured": (a_subject, event_json("structured", "cron job failed",
                                             {"name": "db-01.lan", "ips": ["10.0.0.5"]})),
        "spoofed": (a_subject, event_json("spoofed", "sshd accepted root login", "ws-2.lan")),
        # the workstation's own publishers may speak of any host
        "local": (topology.events_subject("system.service"),
                  event_json("local", "ws-2 rebooted", "ws-2.lan")),
    }
    async with running(settings.model_copy(update={"dedup_enabled": False})):
        for id_, (subject, payload) in sent.items():
            await js.publish(subject, payload, headers={"Nats-Msg-Id": id_})
        await out.wait(4)
        dead = await dlq.wait(1)
        await wait_for(lambda: consumer_settled(nc, topology), what="all events acked")
    info = await js.consumer_info(topology.events_stream, topology.embedder_durable)
    assert sorted(info.config.filter_subjects or []) == sorted(topology.event_subjects)

    embedded = {e.event.id: e.event for e in
                (EmbeddedEvent.model_validate_json(m.data) for m in out.msgs)}
    assert set(embedded) == {"own", "unnamed", "structured", "local"}
    assert embedded["own"].host == "db-01.lan"
    assert embedded["unnamed"].host == "db-01.lan"       # filled in from the subject
    assert embedded["unnamed"].metadata.machine_id is None  # not the embedder's machine
    assert embedded["structured"].host == "db-01.lan"
    assert embedded["local"].host == "ws-2.lan"

    (letter,) = [DeadLetter.model_validate_json(m.data) for m in dead]
    assert letter.reason == "host db-01.lan may not publish events of host ws-2.lan"
    assert letter.subject == a_subject and letter.stage == "embedder"
    assert MemoryEvent.model_validate_json(letter.payload).id == "spoofed"
