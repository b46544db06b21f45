"""The shipped 3-node cluster (deploy/nats/cluster/) as three real nats-server processes on
loopback: streams with 3 replicas made by `ensure_streams`, remote hosts that can publish only
their own events and read nothing, and a node killed with SIGKILL without a message lost.

The configuration is the shipped `node.conf` with a `users.conf` that `users.py` renders for two
hosts; only the environment (free ports, test passwords) is the test's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.errors import NoStreamResponseError
from nats_cluster import NatsCluster
from totalrecall_embedder.settings import Settings as EmbedderSettings
from totalrecall_schema import MemoryEvent, Topology, ensure_streams
from totalrecall_watchers.adapters.publisher import NatsPublisher
from waiting import wait_for

TOPO = Topology(replicas=3)  # the production names: these servers are the test's own
HOST_A, HOST_B = "a.lan", "b.lan"
# A password that looks like a number: the quoting of the environment's values is tested too.
PASSWORDS = {"NATS_PASSWORD": "9e5c22", "NATS_ROUTE_PASSWORD": "route-pw",
             "NATS_HOST_A_LAN_PASSWORD": "a-pw", "NATS_HOST_B_LAN_PASSWORD": "b-pw"}

pytestmark = pytest.mark.timeout(300)


class Cluster(NatsCluster):
    def __init__(self, root: Path) -> None:
        super().__init__(root, [HOST_A, HOST_B], PASSWORDS)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    for n in c.nodes:
        c.start(n)
    try:
        yield c
    finally:
        c.stop()


class Conn:
    """A client connection that keeps the errors the server sent it (permission violations)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.nc: Any = None

    async def connect(self, servers: list[str], **kw: Any) -> Any:
        async def on_error(exc: Exception) -> None:
            self.errors.append(str(exc))

        self.nc = await nats.connect(servers=servers, error_cb=on_error, reconnect_time_wait=0.2,
                                     max_reconnect_attempts=-1, connect_timeout=2, **kw)
        return self.nc

    async def refused(self, what: str) -> bool:
        return any(f"permissions violation for {what}".lower() in e.lower() for e in self.errors)


@pytest.fixture
async def services(cluster: Cluster) -> AsyncIterator[Conn]:
    for n in cluster.nodes:
        await wait_for(lambda n=n: _true(n.healthy()), timeout=30, what=f"{n.name} up")
    # As a service connects: NATS_URL lists every node with the credentials (ServiceSettings)
    url = ",".join(f"nats://services:{PASSWORDS['NATS_PASSWORD']}@127.0.0.1:{n.port}"
                   for n in cluster.nodes)
    conn = Conn()
    nc = await conn.connect(EmbedderSettings(nats_url=url).nats_servers)

    async def streams_made() -> bool:
        js = nc.jetstream(timeout=5)
        try:
            await ensure_streams(js, TOPO)
            # Made is not yet ready: each stream elects a leader of its own after it is made.
            infos = [await js.stream_info(name) for name in
                     (TOPO.events_stream, TOPO.embedded_stream, TOPO.dlq_stream)]
        except Exception:  # the cluster elects its meta leader first
            return False
        return all(i.cluster is not None and i.cluster.leader for i in infos)

    await wait_for(streams_made, timeout=60, interval=0.5, what="streams with 3 replicas")
    yield conn
    await nc.close()


async def _true(value: bool) -> bool:
    return value


async def host_conn(cluster: Cluster, host: str) -> Conn:
    conn = Conn()
    await conn.connect(cluster.urls, user=f"host-{host.replace('.', '_')}",
                       password=PASSWORDS[f"NATS_HOST_{host.upper().replace('.', '_')}_PASSWORD"],
                       inbox_prefix=TOPO.host_inbox_prefix(host))
    return conn


def event(i: int, host: str = HOST_A) -> MemoryEvent:
    return MemoryEvent(id=f"ev-{i}", category="system.service", summary=f"unit {i} failed",
                       metadata={"host": host})


async def publish(js: Any, subject: str, ev: MemoryEvent, deadline_s: float = 30.0) -> None:
    """Publish until JetStream acknowledges it (an election after a node died may take a few
    seconds); the same Nats-Msg-Id every time, so a retry is never a second message."""
    async def acked() -> bool:
        try:
            await js.publish(subject, ev.model_dump_json().encode(), timeout=2,
                             headers={"Nats-Msg-Id": ev.key}, stream=TOPO.events_stream)
        except Exception:
            return False
        return True
    await wait_for(acked, timeout=deadline_s, interval=0.2, what=f"a PubAck for {ev.id}")


async def test_streams_are_replicated_on_the_three_nodes(services: Conn) -> None:
    js = services.nc.jetstream()
    for name in (TOPO.events_stream, TOPO.embedded_stream, TOPO.dlq_stream):
        info = await js.stream_info(name)
        assert info.config.num_replicas == 3, name
        assert info.cluster is not None and info.cluster.leader is not None
        assert len(info.cluster.replicas or []) == 2, name  # the leader and two followers
    assert (await js.stream_info(TOPO.events_stream)).config.subjects == TOPO.event_subjects
    await ensure_streams(js, TOPO)  # again: an update that changes nothing


async def test_an_r1_stream_of_before_becomes_r3_in_place(services: Conn) -> None:
    js = services.nc.jetstream(timeout=10)
    single = Topology.for_test("upgrade")  # R1, and an events stream of the local subjects only
    await js.add_stream(name=single.events_stream, subjects=[single.events_all])

    async def stored() -> bool:
        # A stream just made in a cluster takes a moment before its node answers for it ("no
        # responders"); the message id makes a publish retried after a lost ack store it once.
        try:
            await js.publish(single.events_subject("file"), b"{}", stream=single.events_stream,
                             headers={"Nats-Msg-Id": "before-1"}, timeout=2)
        except (NoStreamResponseError, nats.errors.TimeoutError):
            return False
        return True
    await wait_for(stored, timeout=30, interval=0.2, what="the new R1 stream storing a message")
    await ensure_streams(js, single)
    assert (await js.stream_info(single.events_stream)).config.num_replicas == 1

    replicated = Topology(single.prefix, single.stream_prefix, replicas=3)
    await ensure_streams(js, replicated)

    async def moved() -> bool:
        info = await js.stream_info(single.events_stream)
        peers = info.cluster.replicas if info.cluster else None
        return len(peers or []) == 2 and all(p.current for p in peers or [])
    await wait_for(moved, timeout=30, interval=0.5, what="the stream on three nodes")
    info = await js.stream_info(single.events_stream)
    assert info.config.num_replicas == 3 and info.state.messages == 1
    assert info.config.subjects == replicated.event_subjects


async def test_a_host_publishes_its_own_events_only_and_reads_nothing(
        cluster: Cluster, services: Conn, tmp_path: Path) -> None:
    js = services.nc.jetstream()
    a = await host_conn(cluster, HOST_A)
    js_a = a.nc.jetstream(timeout=2)
    own = TOPO.host_events_subject(HOST_A, "system.service")
    ack = await js_a.publish(own, event(1).model_dump_json().encode(),
                             headers={"Nats-Msg-Id": event(1).key})
    assert ack.stream == TOPO.events_stream

    for subject in (TOPO.host_events_subject(HOST_B, "system.service"),
                    TOPO.events_subject("system.service"), TOPO.rpc_embed_query):
        with pytest.raises(Exception):  # noqa: B017 - no PubAck: the server dropped it
            await js_a.publish(subject, event(2, HOST_B).model_dump_json().encode(), timeout=1)
        await wait_for(lambda s=subject: a.refused(f'Publish to "{s}"'), timeout=10,
                       what=f"a permissions violation for {subject}")
    with pytest.raises(Exception):  # noqa: B017 - nor the JetStream API
        await js_a.stream_info(TOPO.events_stream)

    for subject in (TOPO.events_all, TOPO.host_events_of(HOST_A), TOPO.embedded_all,
                    TOPO.rpc_vector_search, "_INBOX.>", ">"):
        await a.nc.subscribe(subject)
        await a.nc.flush(timeout=5)
        await wait_for(lambda s=subject: a.refused(f'Subscription to "{s}"'), timeout=10,
                       what=f"a permissions violation subscribing to {subject}")

    # The watchers of a remote host (TR_WATCHERS_REMOTE) get through: its subjects, its inbox.
    url = ",".join(f"nats://host-a_lan:a-pw@127.0.0.1:{n.port}" for n in cluster.nodes)
    pub = NatsPublisher(nats_url=url, topology=TOPO, spool=tmp_path / "spool", as_host=HOST_A,
                        publish_timeout_s=2, connect_timeout_s=2)
    await pub.start()
    try:
        await wait_for(lambda: _true(pub.connected), timeout=15, what="watchers connected")
        assert await pub.publish(event(3)) == "published"
    finally:
        await pub.stop()

    info = await js.stream_info(TOPO.events_stream)
    assert info.state.messages == 2  # ev-1 and ev-3; nothing refused got in
    got = [await js.get_msg(TOPO.events_stream, seq) for seq in (1, 2)]
    assert [m.subject for m in got] == [own, own]
    await a.nc.close()


async def test_a_node_killed_loses_nothing(cluster: Cluster, services: Conn) -> None:
    js = services.nc.jetstream(timeout=5)
    leader = (await js.stream_info(TOPO.events_stream)).cluster.leader
    # The reader is a service connected to the stream's leader, the node about to die: it
    # fails over to a node its NATS_URL lists.
    first = [cluster.node(leader)] + [n for n in cluster.nodes if n.name != leader]
    url = ",".join(f"nats://services:{PASSWORDS['NATS_PASSWORD']}@127.0.0.1:{n.port}"
                   for n in first)
    on_leader = Conn()
    nc = await on_leader.connect(EmbedderSettings(nats_url=url).nats_servers,
                                 dont_randomize=True)
    assert nc.connected_url.port == cluster.node(leader).port
    a = await host_conn(cluster, HOST_A)
    js_a = a.nc.jetstream(timeout=2)
    own = TOPO.host_events_subject(HOST_A, "system.service")
    reader = await nc.jetstream(timeout=5).pull_subscribe(
        TOPO.host_events_all, durable="reader", stream=TOPO.events_stream,
        config=ConsumerConfig(durable_name="reader", ack_policy=AckPolicy.EXPLICIT))
    read: list[str] = []

    async def read_all(n: int) -> bool:
        try:
            msgs = await reader.fetch(50, timeout=1)
        except Exception:  # a timeout, or the consumer's leader moving
            msgs = []
        for m in msgs:
            read.append(MemoryEvent.model_validate_json(m.data).id)
            await m.ack()
        return len(set(read)) >= n

    before = [event(i) for i in range(20)]
    for ev in before:
        await publish(js_a, own, ev)
    await wait_for(lambda: read_all(10), timeout=30, what="the first reads")

    cluster.kill(cluster.node(leader))  # the stream's leader: the worst node to lose

    after = [event(i) for i in range(20, 40)]
    for ev in after:
        await publish(js_a, own, ev)
    await wait_for(lambda: read_all(40), timeout=60, what="every event read back")
    assert sorted(set(read)) == sorted(e.id for e in before + after)
    assert nc.is_connected and nc.connected_url.port != cluster.node(leader).port

    info = await js.stream_info(TOPO.events_stream)
    assert info.state.messages == 40
    assert info.cluster is not None and info.cluster.leader != leader

    cluster.start(cluster.node(leader))  # back: it catches up from the others

    async def caught_up() -> bool:
        if not cluster.node(leader).healthy(js_only=False):  # /healthz: current with the cluster
            return False
        info = await js.stream_info(TOPO.events_stream)
        peers = {r.name: r for r in info.cluster.replicas or []}
        return leader in peers and bool(peers[leader].current) and not peers[leader].offline
    await wait_for(caught_up, timeout=60, interval=0.5, what=f"{leader} caught up")
    await publish(js_a, own, event(40))
    assert (await js.stream_info(TOPO.events_stream)).state.messages == 41
    await a.nc.close()
    await nc.close()
