"""Ingest refused with a reason (the disk-full chaos row): when JetStream does not
confirm the events, the client hears 503 "not stored … retry", or 507 when the state disk is
full — never a bare 500."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from nats.errors import TimeoutError as NatsTimeoutError
from test_recall_api import FakeWorld, _client
from totalrecall_recall_api.adapters import JetStreamPublisher, statedisk
from totalrecall_recall_api.ports import PublishFailed
from totalrecall_schema import MemoryEvent, Topology

EVENT = {"summary": "nginx failed: port 80 in use", "id": "n1"}


class RefusingWorld(FakeWorld):
    async def publish(self, events: Sequence[MemoryEvent]) -> list[bool]:
        raise PublishFailed("TimeoutError: nats: timeout")


async def _ingest(tmp_path: Path) -> Any:
    c = await _client(RefusingWorld(), memory_dir=tmp_path / "memory")
    try:
        return await c.post("/memory/ingest", json=EVENT)
    finally:
        await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def test_unconfirmed_publish_is_a_503_with_the_reason(tmp_path: Path) -> None:
    r = await _ingest(tmp_path)
    assert r.status_code == 503
    assert "not stored" in r.json()["detail"] and "nats: timeout" in r.json()["detail"]
    assert r.headers["retry-after"] == "5"


async def test_on_a_full_state_disk_it_is_a_507_naming_the_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(statedisk, "FULL_BELOW_BYTES", 1 << 62)  # every disk is "full"
    r = await _ingest(tmp_path)
    assert r.status_code == 507
    detail = r.json()["detail"]
    assert "state disk is full" in detail and str(tmp_path) in detail and "bytes free" in detail


async def test_health_is_degraded_naming_the_full_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = await _client(FakeWorld(), memory_dir=tmp_path / "memory")
    try:
        assert (await c.get("/memory/health")).json()["checks"]["disk"] == {"ok": True}
        monkeypatch.setattr(statedisk, "FULL_BELOW_BYTES", 1 << 62)
        r = await c.get("/memory/health")
    finally:
        await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]
    assert r.status_code == 200  # recall still answers: degraded, not down
    body = r.json()
    assert body["status"] == "degraded"
    assert "state disk is full" in body["checks"]["disk"]["error"]


class _SilentJetStream:
    """A JetStream whose store cannot write: the server sends no PubAck, the client times out."""

    async def publish(self, *_: Any, **__: Any) -> Any:
        raise NatsTimeoutError


async def test_the_adapter_turns_a_missing_puback_into_publish_failed() -> None:
    pub = JetStreamPublisher(None, _SilentJetStream(), Topology())  # type: ignore[arg-type]
    with pytest.raises(PublishFailed, match="nats: timeout"):
        await pub.publish([MemoryEvent(summary="x")])


async def test_the_adapter_passes_other_errors_through() -> None:
    class Broken:
        async def publish(self, *_: Any, **__: Any) -> Any:
            raise ValueError("a bug, not an outage")
    pub = JetStreamPublisher(None, Broken(), Topology())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await pub.publish([MemoryEvent(summary="x")])
