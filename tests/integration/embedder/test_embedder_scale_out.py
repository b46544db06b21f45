"""Embedders scale out on JetStream alone: two embedder processes (each with its own home, as on
two machines) share the one durable consumer; both take work, one is killed -9, the stream goes
on and the other carries it, and every event reaches the embedded stream exactly once (what the dead one
held unacked is redelivered after the ack wait; a republished batch keeps its Nats-Msg-Id,
which JetStream's duplicate window drops)."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import nats
import pytest
from embedder_proc import EmbedderProcess
from test_embedder_crash import read_stream
from test_embedder_pipeline import publish_events, wait_for
from totalrecall_schema import EmbeddedEvent, MemoryEvent, Topology, ensure_streams

N = 600


def _consumed(metrics: str) -> float:
    found = re.search(r"^totalrecall_embedder_events_in_total (\S+)$", metrics, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.timeout(300)
async def test_two_embedders_share_the_work_and_one_may_die(
        nats_url: str, topology: Topology, tmp_path: Path, model_path: Path) -> None:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, topology)
    procs = [EmbedderProcess(nats_url=nats_url, home=tmp_path / f"host{i}", topology=topology,
                             log_path=tmp_path / f"embedder{i}.log", model_path=model_path,
                             dedup_enabled="false", batch_max=16, ack_wait_s=3, n_threads=1,
                             device="cpu")
             for i in range(2)]
    try:
        for i, p in enumerate(procs):
            (tmp_path / f"host{i}").mkdir()
            await p.start().wait_healthy()
        events = [MemoryEvent(id=f"fleet-{i}", category="system.service",
                              summary=f"unit {i % 23}.service restarted on worker {i % 7} "
                                      f"after {i % 5} failures (run {i})")
                  for i in range(N)]
        await publish_events(nc, topology, events[: N // 2])

        async def both_working() -> bool:
            return all([_consumed(await p.metrics()) > 0 for p in procs])
        await wait_for(both_working, timeout=120, interval=0.02, what="both embedders taking work")
        procs[0].kill9()  # whatever it held unacked is redelivered to the survivor
        await publish_events(nc, topology, events[N // 2:])  # the stream goes on

        async def settled() -> bool:
            ci = await js.consumer_info(topology.events_stream, topology.embedder_durable)
            return ci.num_pending == 0 and ci.num_ack_pending == 0
        await wait_for(settled, timeout=180, interval=0.2, what="the survivor acking every event")
        assert procs[1].alive and _consumed(await procs[1].metrics()) >= N // 2
        total = (await js.stream_info(topology.embedded_stream)).state.messages
        msgs = await read_stream(js, topology, total)
    finally:
        for p in procs:
            p.stop()
        await nc.close()

    ids = collections.Counter(m.headers["Nats-Msg-Id"] for m in msgs)
    assert set(ids) == {e.key for e in events}
    assert all(c == 1 for c in ids.values()), {k: c for k, c in ids.items() if c > 1}
    assert total == N
    for m in msgs:
        assert EmbeddedEvent.model_validate_json(m.data).vector is not None
