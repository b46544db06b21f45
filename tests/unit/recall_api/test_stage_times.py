"""A recall answers with where its own time went (`Server-Timing`), stage by stage."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from totalrecall_recall_api.recall.stage_times import add, collecting, server_timing

from tests.chaos.load_client import server_timing as parse_server_timing
from tests.unit.recall_api.test_recall_api import FakeWorld, _client


async def _recall(c: httpx.AsyncClient, **body: Any) -> dict[str, float]:
    r = await c.post("/memory/recall", json={"query": "why did nginx fail?", **body})
    assert r.status_code == 200, r.text
    return parse_server_timing(r.headers["server-timing"])


class SlowKeywords(FakeWorld):
    async def bm25(self, *a: Any, **k: Any) -> list[tuple[str, float]]:
        await asyncio.sleep(0.05)  # the slow stage under test
        return await super().bm25(*a, **k)


async def test_a_slow_stage_shows_in_that_recalls_header() -> None:
    world = SlowKeywords()
    c = await _client(world)
    try:
        await c.post("/memory/ingest", json={"summary": "nginx failed: port 80 in use"})
        stages = await _recall(c)
        assert {"queue", "embed", "bm25", "vector_hot", "fusion", "mmr", "total"} <= set(stages)
        assert stages["bm25"] >= 50.0
        assert stages["total"] >= stages["bm25"]
        assert stages["vector_hot"] < stages["bm25"]  # the time is put where it was spent
        # A second recall's tally is its own: added to the first's, its keyword search would
        # have taken longer than the whole recall.
        again = await _recall(c)
        assert 50.0 <= again["bm25"] <= again["total"]
    finally:
        await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def test_a_stage_run_for_each_namespace_is_summed() -> None:
    c = await _client(SlowKeywords())
    try:
        for ns in ("agent-a", "agent-b"):
            await c.post("/memory/ingest", json={"summary": "nginx failed", "namespace": ns})
        both = await _recall(c, namespace="agent-a", namespaces=["agent-a", "agent-b"])
        # The two keyword searches ran at once: their stage is the sum, over the recall's time.
        assert both["bm25"] >= 100.0
        assert both["total"] < both["bm25"]
    finally:
        await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def test_the_tally_is_per_task_tree_and_nothing_outside_a_request() -> None:
    add("bm25", 1.0)  # outside a request: no tally, no error

    async def request(stage: str, seconds: float) -> dict[str, float]:
        with collecting() as times:
            await asyncio.gather(asyncio.sleep(0), asyncio.create_task(_child(stage, seconds)))
            add(stage, seconds)
        return times

    async def _child(stage: str, seconds: float) -> None:
        await asyncio.sleep(0)
        add(stage, seconds)

    a, b = await asyncio.gather(request("bm25", 0.002), request("rows", 0.003))
    assert a == {"bm25": 0.004} and b == {"rows": 0.006}
    assert server_timing({"process ends": 0.0123, "bm25": 0.004}) == \
        "process_ends;dur=12.3, bm25;dur=4.0"
