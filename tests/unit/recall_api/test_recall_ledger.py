"""POST/GET /memory/ledger with a fake publisher: durable first, fed to memory, caught up after
a failed publish (also across a restart), a broken chain refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from totalrecall_recall_api.app import create_app
from totalrecall_recall_api.settings import Settings
from totalrecall_schema import MemoryEvent
from totalrecall_schema.ledger import LedgerAppend, LedgerFile, verify_file


class FakePublisher:
    def __init__(self) -> None:
        self.events: list[MemoryEvent] = []
        self.up = True

    async def publish(self, events: Sequence[MemoryEvent]) -> list[bool]:
        await asyncio.sleep(0)
        if not self.up:
            raise ConnectionError("nats down")
        self.events += events
        return [False] * len(events)

    async def ping(self) -> bool:
        return self.up


@asynccontextmanager
async def client(path: Path, pub: FakePublisher) -> AsyncIterator[httpx.AsyncClient]:
    fake: Any = pub  # the other ports are not used by the ledger routes
    app = create_app(Settings(ledger_path=path), publisher=pub, store=fake, embedder=fake,
                     index=fake)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        yield c


def action(i: int) -> dict[str, Any]:
    return {"action": "service.restart", "target": f"unit{i}.service", "detail": "config changed"}


async def test_append_read_and_feed_memory(tmp_path: Path) -> None:
    path, pub = tmp_path / "ledger.jsonl", FakePublisher()
    async with client(path, pub) as c:
        rs = await asyncio.gather(*(c.post("/memory/ledger", json=action(i)) for i in range(20)))
        assert all(r.status_code == 200 and r.json()["published"] for r in rs)
        assert sorted(r.json()["entry"]["seq"] for r in rs) == list(range(1, 21))
        got = (await c.get("/memory/ledger", params={"since_seq": 15})).json()["entries"]
        assert [e["seq"] for e in got] == [16, 17, 18, 19, 20]
        bad = await c.post("/memory/ledger", json={"action": "Not An Action"})
        assert bad.status_code == 422
        metrics = (await c.get("/metrics")).text
    assert verify_file(path).entries == 20
    assert len(pub.events) == 20 and {e.category for e in pub.events} == {"agent.action"}
    assert 'totalrecall_recall_ingested_events_total{category="agent.action"} 20.0' in metrics
    assert 'endpoint="/memory/ledger"' in metrics


async def test_a_failed_publish_is_caught_up_even_after_a_restart(tmp_path: Path) -> None:
    path, pub = tmp_path / "ledger.jsonl", FakePublisher()
    async with client(path, pub) as c:
        assert (await c.post("/memory/ledger", json=action(1))).json()["published"]
        pub.up = False
        r = await c.post("/memory/ledger", json=action(2))
        assert r.status_code == 200 and r.json()["published"] is False  # durable, not in memory
    assert verify_file(path).entries == 2 and len(pub.events) == 1
    pub.up = True
    async with client(path, pub) as c:  # a restarted API
        assert (await c.post("/memory/ledger", json=action(3))).json()["published"]
    assert [e.metadata.model_dump()["ledger_seq"] for e in pub.events] == [1, 2, 3]


async def test_a_broken_chain_is_refused_with_409(tmp_path: Path) -> None:
    path, pub = tmp_path / "ledger.jsonl", FakePublisher()
    async with client(path, pub) as c:
        await c.post("/memory/ledger", json=action(1))
        path.write_bytes(path.read_bytes() + b'{"seq":2,"ts')
        r = await c.post("/memory/ledger", json=action(2))
        assert r.status_code == 409 and "torn" in r.json()["detail"]


async def test_an_entry_that_cannot_be_a_memory_does_not_block_the_rest(tmp_path: Path) -> None:
    path, pub = tmp_path / "ledger.jsonl", FakePublisher()
    # stamped far in the future by another writer: valid in the chain, never a memory
    LedgerFile(path).append(LedgerAppend(action="command.run"),
                            now=datetime(2100, 1, 1, tzinfo=UTC))
    async with client(path, pub) as c:
        future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
        bad = await c.post("/memory/ledger", json={**action(0), "ts": future})
        assert bad.status_code == 422 and "24 hours" in bad.text
        r = await c.post("/memory/ledger", json=action(2))
        assert r.json()["published"] and r.json()["entry"]["seq"] == 2
    assert [e.metadata.model_dump()["ledger_seq"] for e in pub.events] == [2]
    assert verify_file(path).entries == 2
