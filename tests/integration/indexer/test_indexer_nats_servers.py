"""The indexer takes a cluster's nodes as a comma-separated NATS_URL, as the other services do:
with the first node listed down, it connects to another and consumes, answers searches and its
admin verbs (real nats-server, Postgres, zvec)."""

from __future__ import annotations

import socket

from indexer_it_helpers import Harness, make_event, running, unit_vectors, wait_for
from totalrecall_indexer.settings import Settings
from totalrecall_schema import AdminReply, AdminRequest


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_listed_node_down_is_passed_over(settings: Settings, harness: Harness) -> None:
    settings = settings.model_copy(
        update={"nats_url": f"nats://127.0.0.1:{_dead_port()},{settings.nats_url}"})
    assert len(settings.nats_servers) == 2
    batch = [make_event(i, v) for i, v in enumerate(unit_vectors(5, seed=11))]
    async with running(settings) as app:
        await harness.publish(batch)

        async def stored() -> bool:
            return sum(app.indexer.tiers.count(t) for t in ("hot", "warm", "cold")) == 5
        await wait_for(stored, timeout=30, what="the events consumed through the live node")
        reply = AdminReply.model_validate_json(
            await harness.request(harness.topology.rpc_index_admin, AdminRequest(verb="stats")))
        assert reply.ok, reply.error
