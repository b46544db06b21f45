"""`publish_event`: the one rule by which watchers and recall-api publish a MemoryEvent."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from totalrecall_schema import EventMetadata, MemoryEvent, Topology
from totalrecall_schema.publish import MSG_ID_HEADER, event_subject, publish_event


class FakeJs:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def publish(self, subject: str, payload: bytes = b"", timeout: float | None = None,
                      stream: str | None = None, headers: dict[str, Any] | None = None
                      ) -> Any:
        self.calls.append(dict(subject=subject, payload=payload, timeout=timeout, stream=stream,
                               headers=headers))
        return "ack"


def _event(namespace: str = "default", host: str = "web-01") -> MemoryEvent:
    return MemoryEvent(id="e1", namespace=namespace, timestamp=datetime(2026, 11, 29, tzinfo=UTC),
                       category="system.service", subcategory="status_change", summary="x",
                       metadata=EventMetadata(host=host))


def _publish(js: FakeJs, topo: Topology, ev: MemoryEvent, **kw: Any) -> Any:
    return asyncio.run(publish_event(js, topo, ev, **kw))


def test_subject_per_category_and_the_key_as_msg_id() -> None:
    js, topo, ev = FakeJs(), Topology.for_test("pub"), _event()
    assert _publish(js, topo, ev) == "ack"
    (call,) = js.calls
    assert call["subject"] == topo.events_subject("system.service") == "tpub.events.system.service"
    assert call["headers"] == {MSG_ID_HEADER: ev.key} and MSG_ID_HEADER == "Nats-Msg-Id"
    assert call["stream"] == topo.events_stream
    assert MemoryEvent.model_validate_json(call["payload"]) == ev
    assert call["timeout"] is None  # the JetStream context's own


def test_a_remote_host_publishes_on_its_own_subjects_with_the_callers_payload() -> None:
    js, topo, ev = FakeJs(), Topology(), _event()
    _publish(js, topo, ev, as_host="db-01.lan", payload=b"{raw}", timeout=2.5)
    (call,) = js.calls
    assert call["subject"] == topo.host_events_subject("db-01.lan", "system.service")
    assert call["subject"] == event_subject(topo, "system.service", "db-01.lan")
    assert topo.host_of_subject(call["subject"]) == "db-01.lan"
    assert call["payload"] == b"{raw}" and call["timeout"] == 2.5


@pytest.mark.parametrize("partitions", [1, 4, 16])
def test_raw_events_are_not_partitioned(partitions: int) -> None:
    """Partitioning starts at the embedder (`embedded_subject_of`): every raw event goes to the
    events stream's one subject of its category, whatever namespace and host."""
    topo = Topology(partitions=partitions)
    for ns, host in (("default", "a"), ("team", "b"), ("x", "c"), ("y", "d")):
        js = FakeJs()
        _publish(js, topo, _event(ns, host))
        assert js.calls[0]["subject"] == "memory.events.system.service"
        embedded = topo.embedded_subject_of(_event(ns, host))
        want = topo.embedded_subject("system.service", topo.partition_of(_event(ns, host)))
        assert embedded == want
