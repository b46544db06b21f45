"""The action ledger through the real recall API lifespan (real nats-server with JetStream, real
Postgres): many concurrent appends keep one verified chain, each entry is in JetStream once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import nats
from totalrecall_recall_api.app import create_app
from totalrecall_recall_api.settings import Settings
from totalrecall_schema import MemoryEvent, Topology
from totalrecall_schema.ledger import verify_file


async def test_concurrent_appends_verify_and_reach_jetstream(
        nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path) -> None:
    path = tr_home / "ledger.jsonl"
    settings = Settings(nats_url=nats_url, pg_dsn=pg_dsn, subject_prefix=topology.prefix,
                        stream_prefix=topology.stream_prefix, memory_dir=tr_home / "memory",
                        ledger_path=path)
    app = create_app(settings)
    n = 60
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://recall", timeout=60) as c:
        rs = await asyncio.gather(*(c.post("/memory/ledger", json={
            "action": "command.run", "target": f"apt-get install -y pkg{i}",
            "detail": f"exit 0; token=ghp_{'a' * 36}"}) for i in range(n)))
        assert all(r.status_code == 200 for r in rs), [r.text for r in rs if r.status_code != 200]
        assert all(r.json()["published"] for r in rs)
        tail = (await c.get("/memory/ledger", params={"since_seq": n - 2})).json()["entries"]
    assert [e["seq"] for e in tail] == [n - 1, n]

    v = verify_file(path)
    assert v.ok and v.entries == n and v.last_seq == n
    assert "ghp_" + "a" * 36 not in path.read_text()  # scrubbed before it was written

    # The CLI agrees, run as the operator would.
    out = subprocess.run([sys.executable, "-m", "totalrecall.main", "ledger", "verify", "--path",
                          str(path), "--json"], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and json.loads(out.stdout)["entries"] == n

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(topology.events_stream)
        assert info.state.messages == n
        sub = await js.subscribe(topology.events_subject("agent.action"), ordered_consumer=True)
        events: list[MemoryEvent] = []
        for _ in range(n):
            msg = await sub.next_msg(timeout=10)
            events.append(MemoryEvent.model_validate_json(msg.data))
        meta: list[dict[str, Any]] = [e.metadata.model_dump() for e in events]
        assert sorted(m["ledger_seq"] for m in meta) == list(range(1, n + 1))
        assert all(e.category == "agent.action" and e.subcategory == "command.run"
                   for e in events)
    finally:
        await nc.close()
