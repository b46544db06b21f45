"""kill -9 of the embedder mid-batch, then a restart: every event arrives on the embedded stream
exactly once (what was published but not acked before the crash is redelivered and republished
with the same Nats-Msg-Id, which JetStream's duplicate window drops)."""

from __future__ import annotations

import collections
import contextlib
from pathlib import Path
from typing import Any

import nats
import pytest
from embedder_proc import EmbedderProcess
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from test_embedder_pipeline import publish_events, wait_for
from totalrecall_schema import EmbeddedEvent, MemoryEvent, Topology, ensure_streams

N = 400


async def read_stream(js: Any, topology: Topology, expected: int) -> list[Any]:
    """Every message of the embedded stream (an ephemeral consumer from the start)."""
    sub = await js.pull_subscribe(
        topology.embedded_all, stream=topology.embedded_stream,
        config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL))
    out: list[Any] = []

    async def all_read() -> bool:  # each fetch waits up to 1 s for messages: no pause between
        with contextlib.suppress(TimeoutError):
            out.extend(await sub.fetch(256, timeout=1))
        return len(out) >= expected

    try:
        await wait_for(all_read, timeout=30, interval=0, what=f"{expected} embedded messages",
                       context=lambda: f"read {len(out)}")
    finally:
        await sub.unsubscribe()
    return out


@pytest.mark.timeout(240)
async def test_kill_9_mid_batch_then_restart_gives_no_duplicates(
        nats_url: str, topology: Topology, tr_home: Path, model_path: Path,
        tmp_path: Path) -> None:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, topology)
    proc = EmbedderProcess(nats_url=nats_url, home=tr_home, topology=topology,
                           log_path=tmp_path / "embedder.log", model_path=model_path,
                           dedup_enabled="false", batch_max=32, ack_wait_s=3,
                           n_threads=1, device="cpu")
    try:
        await proc.start().wait_healthy()
        events = [MemoryEvent(id=f"burst-{i}", category="system.process",
                              summary=f"burst event {i}: service {i % 17} restarted after "
                                      f"{i % 5} failures on host h{i % 11}")
                  for i in range(N)]
        await publish_events(nc, topology, events)

        async def mid_batch() -> Any:
            """Best: a batch published but not acked yet (its redelivery is republished with the
            same ids); else any batch in flight once a third of the burst is through."""
            si = await js.stream_info(topology.embedded_stream)
            ci = await js.consumer_info(topology.events_stream, topology.embedder_durable)
            acked = ci.delivered.consumer_seq - ci.num_ack_pending
            if ci.num_ack_pending > 0 and (si.state.messages > acked
                                           or si.state.messages >= N // 3):
                return si.state.messages, ci.num_ack_pending
            return None

        at_kill, in_flight = await wait_for(mid_batch, timeout=60, interval=0.002,
                                            what="a batch in flight")
        proc.kill9()
        assert at_kill < N, "the burst finished before the kill: nothing was tested"
        ci = await js.consumer_info(topology.events_stream, topology.embedder_durable)
        published_unacked = at_kill - (ci.delivered.consumer_seq - ci.num_ack_pending)

        await proc.start().wait_healthy()

        async def settled() -> bool:
            ci = await js.consumer_info(topology.events_stream, topology.embedder_durable)
            return ci.num_pending == 0 and ci.num_ack_pending == 0
        await wait_for(settled, timeout=120, interval=0.2, what="every event acked")
        metrics = await proc.metrics()
        total = (await js.stream_info(topology.embedded_stream)).state.messages
        msgs = await read_stream(js, topology, total)
    finally:
        proc.stop()
        await nc.close()

    ids = collections.Counter(m.headers["Nats-Msg-Id"] for m in msgs)
    plain = {k: c for k, c in ids.items() if ":" not in k}  # not :r<n> / :backfill
    assert set(plain) == {e.key for e in events}
    assert all(c == 1 for c in plain.values()), {k: c for k, c in plain.items() if c > 1}
    assert len(plain) == N and total == len(msgs) == N
    for m in msgs:
        emb = EmbeddedEvent.model_validate_json(m.data)
        assert emb.vector is not None and m.headers["Nats-Msg-Id"] == emb.event.key
    hits = [ln for ln in metrics.splitlines()
            if ln.startswith('totalrecall_embedder_cache_requests_total{cache="disk"')]
    print(f"killed with {at_kill}/{N} published, {in_flight} in flight "
          f"({published_unacked} published but not acked); after restart: {hits}")
