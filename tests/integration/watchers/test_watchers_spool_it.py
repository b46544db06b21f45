"""NATS down → events spool on disk; NATS back (even after a restart) → all drained, in order."""

from __future__ import annotations

from pathlib import Path

import nats
from nats.js.errors import NotFoundError
from totalrecall.infra import NatsServer, free_ports
from totalrecall_schema import MemoryEvent, Topology
from totalrecall_watchers.adapters.publisher import NatsPublisher
from watchers_it_helpers import StreamReader, wait_until


def ev(i: int) -> MemoryEvent:
    return MemoryEvent(category="system.storage", subcategory="space_warning",
                       summary=f"/home at 9{i}% capacity", source="watcher.storage")


def publisher(url: str, topology: Topology, spool: Path) -> NatsPublisher:
    return NatsPublisher(nats_url=url, topology=topology, spool=spool, publish_timeout_s=1.0,
                         connect_timeout_s=0.5, reconnect_wait_s=0.2, drain_interval_s=0.2)


async def stream_events(url: str, topology: Topology) -> list[MemoryEvent]:
    nc = await nats.connect(url)
    try:
        r = StreamReader(nc.jetstream(), topology)
        return await r.events()
    except NotFoundError:
        return []
    finally:
        await nc.close()


async def test_spooled_while_down_drained_after_restart(tmp_path: Path, topology: Topology) -> None:
    port, monitor_port = free_ports(2)
    server = NatsServer(tmp_path / "nats", port=port, monitor_port=monitor_port)
    spool = tmp_path / "spool"
    events = [ev(i) for i in range(5)]
    pub = publisher(server.url, topology, spool)
    await pub.start()
    try:
        for e in events:
            assert await pub.publish(e) == "spooled"
    finally:
        await pub.stop()
    assert len(list(spool.glob("*.json"))) == 5  # on disk, fsynced

    server.start()
    try:
        pub2 = publisher(server.url, topology, spool)  # a restarted service
        await pub2.start()
        try:
            await wait_until(lambda: pub2.spool is not None and len(pub2.spool) == 0, 20, "drain")
            assert await pub2.publish(ev(9)) == "published"
        finally:
            await pub2.stop()
        got = await stream_events(server.url, topology)
        assert [g.summary for g in got] == [e.summary for e in events] + [ev(9).summary]
        assert [g.id for g in got[:5]] == [e.id for e in events]
        assert not list(spool.glob("*.json"))
    finally:
        server.stop()


async def test_outage_while_running_loses_nothing(tmp_path: Path, topology: Topology) -> None:
    port, monitor_port = free_ports(2)
    server = NatsServer(tmp_path / "nats", port=port, monitor_port=monitor_port).start()
    pub = publisher(server.url, topology, tmp_path / "spool")
    await pub.start()
    try:
        await wait_until(lambda: pub.connected, 10, "connect")
        assert await pub.publish(ev(0)) == "published"
        server.stop()
        await wait_until(lambda: not pub.connected, 10, "disconnect")
        outcomes = [await pub.publish(ev(i)) for i in (1, 2, 3)]
        assert outcomes == ["spooled"] * 3
        server.start()
        await wait_until(lambda: pub.spool is not None and len(pub.spool) == 0, 30, "drain")
        assert pub.health()["spool"]["drained"] == 3
    finally:
        await pub.stop()
    try:
        got = await stream_events(server.url, topology)
        assert [g.summary for g in got] == [ev(i).summary for i in range(4)]
    finally:
        server.stop()
