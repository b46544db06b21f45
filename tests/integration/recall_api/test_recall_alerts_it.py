"""Proactive alerts against a real Postgres: events made by the watchers' own code, written by
the indexer's own Postgres writer (its schema and upsert), read by the recall API with its real
lifespan (the background monitor, `GET /memory/alerts`, the recall block); then the recovery
events, and the alerts resolve.

systemd is not PID 1 in this container (`systemctl is-system-running`: offline), so the timers
and services watchers run on fake `systemctl` answers; their event code is the real one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from alert_events import (
    journal_lines,
    process_crashes,
    storage_reports,
    timer_runs,
    unit_failed_entry,
    unit_states,
)
from totalrecall_indexer.adapters.pgstore import PgRow, PgStore
from totalrecall_recall_api.app import create_app
from totalrecall_recall_api.settings import Settings
from totalrecall_schema import MemoryEvent, Topology
from totalrecall_schema.daily_log import LogRecord
from waiting import wait_for

NOW = datetime.now(UTC)
DAY = timedelta(days=1)


@pytest.fixture
async def pg(pg_dsn: str) -> AsyncIterator[PgStore]:
    store = PgStore(pg_dsn)
    await store.start()  # the indexer's migrations: its schema
    yield store
    await store.close()


async def index(store: PgStore, events: Sequence[MemoryEvent]) -> None:
    await store.upsert([PgRow(LogRecord(event=e), tier="hot", embedded=False) for e in events])


def settings(nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path,
             **alerts: Any) -> Settings:
    return Settings(nats_url=nats_url, pg_dsn=pg_dsn, subject_prefix=topology.prefix,
                    stream_prefix=topology.stream_prefix, memory_dir=tr_home / "memory",
                    embed_timeout_s=0.5, search_timeout_s=0.5,
                    **alerts)


@asynccontextmanager
async def api(s: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(s)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://recall", timeout=30) as c:
        yield c


async def block(c: httpx.AsyncClient, namespace: str = "default") -> dict[str, Any]:
    r = await c.post("/memory/recall", json={"query": "hi", "namespace": namespace})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def nightly_backup() -> list[MemoryEvent]:
    """Three nights of a failing backup timer, then a successful run (the last event)."""
    first = NOW - 2 * DAY - timedelta(hours=1)
    runs = [(first + i * DAY, "exit-code") for i in range(3)] + [
        (NOW - timedelta(minutes=5), "success")]
    return timer_runs(runs)


async def test_alerts_open_in_the_block_and_endpoint_then_resolve(
        nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path, pg: PgStore) -> None:
    backup = nightly_backup()
    assert [e.subcategory for e in backup] == ["failed"] * 3 + ["executed"]
    # The journal reports the same three failures: they must not count twice.
    journal = journal_lines([(e.timestamp, unit_failed_entry("backup.service"))
                             for e in backup[:3]])
    disk = storage_reports("/srv", [(NOW - 2 * DAY, 91.0), (NOW - timedelta(hours=2), 96.0),
                                    (NOW - timedelta(minutes=1), 60.0)])
    assert [e.metadata.model_extra["level"] for e in disk] == ["warning", "critical", "ok"]
    crashes = process_crashes("render-worker", [NOW - timedelta(hours=h) for h in (4, 3, 2)])
    idle = unit_states("postgresql-15.service", [(NOW - 30 * DAY, "active", "running")])
    busy = unit_states("nginx.service", [(NOW - 30 * DAY, "active", "running")])
    busy += journal_lines([(NOW - 2 * DAY, {
        "MESSAGE": "upstream timed out while reading response header", "PRIORITY": "3",
        "SYSLOG_IDENTIFIER": "nginx", "_SYSTEMD_UNIT": "nginx.service", "_TRANSPORT": "stdout"})])
    assert busy[-1].metadata.service == "nginx.service"
    await index(pg, backup[:3] + journal + disk[:2] + crashes + idle + busy)

    s = settings(nats_url, pg_dsn, topology, tr_home, alerts_interval_s=0.2)
    async with api(s) as c:
        # The background monitor finds them without being asked; a greeting's block shows them.
        first = await wait_for(lambda: _with_alerts(c), timeout=20, what="alerts in the block")
        text = first["system_memory"]
        assert text.startswith("<system_alerts>") and text.endswith("</system_alerts>")
        assert len([ln for ln in text.splitlines() if ln.startswith("- (")]) == 3
        assert text.splitlines()[-2] == "- and 1 more (GET /memory/alerts)"

        r = await c.get("/memory/alerts")
        assert r.status_code == 200, r.text
        body = r.json()
        got = {a["id"]: a for a in body["alerts"]}
        assert sorted(got) == ["disk_filling:/srv", "process_crashing:render-worker",
                               "service_idle:postgresql-15.service",
                               "unit_failing:backup.service"]
        failing = got["unit_failing:backup.service"]
        assert (failing["count"], failing["severity"], failing["state"]) == (3, "error", "open")
        assert set(failing["evidence"]) <= {e.id for e in backup[:3] + journal}
        assert got["disk_filling:/srv"]["severity"] == "critical"
        assert "full in ~" in got["disk_filling:/srv"]["text"]
        assert got["process_crashing:render-worker"]["count"] == 3
        assert got["service_idle:postgresql-15.service"]["severity"] == "info"
        assert [a["id"] for a in body["alerts"]][:2] == ["disk_filling:/srv",
                                                         "unit_failing:backup.service"]
        assert body["namespace"] == "default" and body["checked_at"]
        assert [a["id"] for a in first["alerts"]] == [a["id"] for a in body["alerts"]]

        # Another namespace has none; an unknown state is refused.
        assert (await c.get("/memory/alerts", params={"namespace": "elsewhere"})).json()[
            "alerts"] == []
        assert (await c.get("/memory/alerts", params={"state": "closed"})).status_code == 422

        # Recovery: the backup runs fine, the disk is back below its warning level.
        await index(pg, [backup[3], disk[2]])
        await wait_for(lambda: _without(c, "backup.service"), timeout=20,
                       what="the backup alert gone from the block")
        r = await c.get("/memory/alerts")
        assert sorted(a["id"] for a in r.json()["alerts"]) == [
            "process_crashing:render-worker", "service_idle:postgresql-15.service"]
        every = {a["id"]: a for a in (await c.get("/memory/alerts",
                                                  params={"state": "all"})).json()["alerts"]}
        assert every["unit_failing:backup.service"]["state"] == "resolved"
        assert every["unit_failing:backup.service"]["resolved_at"] is not None
        assert every["disk_filling:/srv"]["state"] == "resolved"

        metrics = (await c.get("/metrics")).text
        assert 'totalrecall_recall_alerts_open{rule="unit_failing"} 0.0' in metrics
        assert 'totalrecall_recall_alerts_open{rule="process_crashing"} 1.0' in metrics


async def _with_alerts(c: httpx.AsyncClient) -> dict[str, Any] | None:
    got = await block(c)
    return got if len(got["alerts"]) == 4 else None


async def _without(c: httpx.AsyncClient, subject: str) -> bool:
    got = await block(c)
    return bool(got["alerts"]) and subject not in got["system_memory"]


async def test_alerts_off_and_a_question_asked_in_the_past(
        nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path, pg: PgStore) -> None:
    await index(pg, nightly_backup()[:3])
    s = settings(nats_url, pg_dsn, topology, tr_home, alerts_interval_s=3600)
    async with api(s) as c:
        r = await c.get("/memory/alerts")  # examines now, for recalls too
        assert [a["id"] for a in r.json()["alerts"]] == ["unit_failing:backup.service"]
        assert "<system_alerts>" in (await block(c))["system_memory"]
        past = await c.post("/memory/recall", json={"query": "hi", "asOf": "2026-01-01"})
        assert past.json()["alerts"] == [] and past.json()["system_memory"] == ""
    s = settings(nats_url, pg_dsn, topology, tr_home, alerts_enabled=False)
    async with api(s) as c:
        assert (await c.get("/memory/alerts")).status_code == 503
        assert (await block(c))["system_memory"] == ""


async def test_each_units_newest_state_is_read_unit_by_unit(pg: PgStore, pg_dsn: str) -> None:
    """The idle rule's "newest state of each unit" (a walk of the units, then one probe each)
    gives what a DISTINCT ON over every service event gives, other namespaces and categories
    left out."""
    from totalrecall_recall_api.adapters.alert_store import _FIELDS, PostgresAlertRows

    events: list[MemoryEvent] = []
    for i, unit in enumerate(("nginx.service", "postgresql-15.service", "redis.service")):
        events += unit_states(unit, [(NOW - (10 - j) * DAY + i * timedelta(minutes=1),
                                      "active" if j % 2 else "failed", "running" if j % 2 else
                                      "failed") for j in range(5)])
    events += unit_states("other.service", [(NOW - DAY, "active", "running")], namespace="else")
    events += journal_lines([(NOW - 2 * DAY, unit_failed_entry("redis.service"))])
    await index(pg, events)
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    try:
        got = await PostgresAlertRows(pool).unit_states("default")
        want = await pool.fetch(f"""SELECT DISTINCT ON (service) {_FIELDS} FROM memories
            WHERE namespace = 'default' AND category = 'system.service' AND service IS NOT NULL
            ORDER BY service, ts DESC""")
    finally:
        await pool.close()
    assert [(r.service, r.id) for r in got] == [(r["service"], r["id"]) for r in want]
    assert [r.service for r in got] == ["nginx.service", "postgresql-15.service",
                                        "redis.service"]

