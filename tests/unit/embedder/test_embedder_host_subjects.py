"""The embedder's check of remote hosts' events (`core.batch.parse_event`), without NATS."""

from __future__ import annotations

import json

from totalrecall_embedder.core.batch import Incoming, parse_event, plan_batch
from totalrecall_schema import DeadLetter, MemoryEvent, Topology

TOPO = Topology.for_test("hosts")


def msg(subject: str, **metadata: object) -> Incoming:
    return Incoming(subject, json.dumps({"summary": "unit failed", "category": "error",
                                         "metadata": metadata}).encode())


def test_a_host_scoped_event_is_the_hosts() -> None:
    ev = parse_event(msg(TOPO.host_events_subject("a.lan", "error")), TOPO)
    assert isinstance(ev, MemoryEvent) and ev.host == "a.lan"
    ev = parse_event(msg(TOPO.host_events_subject("a.lan", "error"), host="A.LAN"), TOPO)
    assert isinstance(ev, MemoryEvent) and ev.host == "a.lan"


def test_another_hosts_event_is_a_dead_letter() -> None:
    dl = parse_event(msg(TOPO.host_events_subject("a", "error"), host="b"), TOPO)
    assert isinstance(dl, DeadLetter) and dl.reason == "host a may not publish events of host b"
    assert dl.subject == TOPO.host_events_subject("a", "error")


def test_local_subjects_are_trusted_and_bad_payloads_still_dead() -> None:
    ev = parse_event(msg(TOPO.events_subject("error"), host="b"), TOPO)
    assert isinstance(ev, MemoryEvent) and ev.host == "b"
    for data in (b"[1, 2]", b"not json", b'{"summary": ""}'):
        dl = parse_event(Incoming(TOPO.host_events_subject("a", "error"), data), TOPO)
        assert isinstance(dl, DeadLetter) and dl.reason.startswith("invalid MemoryEvent"), data
    dl = parse_event(Incoming(f"{TOPO.prefix}.host.BAD%.events.error", b"{}"), TOPO)
    assert isinstance(dl, DeadLetter) and "not a host token" in dl.reason


def test_plan_batch_dead_letters_only_the_spoofed_event() -> None:
    plan = plan_batch([msg(TOPO.host_events_subject("a", "error"), host="a"),
                       msg(TOPO.host_events_subject("a", "error"), host="b")], None,
                      topology=TOPO)
    assert [i for i, _ in plan.dead] == [1] and len(plan.texts) == 1
