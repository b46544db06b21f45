"""Learned patterns, supersession and session continuity through the recall API on a real
nats-server and a real Postgres. The memories are written with the indexer's own Postgres writer
(`PgStore.upsert`: its migrations, its supersede marking); what the API publishes is read back
from JetStream. The whole pipeline (embedder, indexer) is in tests/e2e/test_patterns_sessions.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy
from pattern_world import World
from totalrecall_indexer.adapters.pgstore import PgRow, PgStore
from totalrecall_recall_api.app import create_app
from totalrecall_recall_api.settings import Settings
from totalrecall_schema import MemoryEvent, Topology, ensure_streams, memory_key
from totalrecall_schema.daily_log import LogRecord


@pytest.fixture
def settings(nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path) -> Settings:
    return Settings(nats_url=nats_url, pg_dsn=pg_dsn, subject_prefix=topology.prefix,
                    stream_prefix=topology.stream_prefix, memory_dir=tr_home / "memory",
                    embed_timeout_s=0.5, search_timeout_s=0.5,
                    patterns_timezone="UTC", profile_cache_s=0)


@asynccontextmanager
async def api(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://recall", timeout=30) as c:
        yield c


@pytest.fixture
async def pg(pg_dsn: str) -> AsyncIterator[PgStore]:
    store = PgStore(pg_dsn)
    await store.start()  # the indexer's migrations
    yield store
    await store.close()


async def index(pg: PgStore, events: list[MemoryEvent]) -> None:
    """What the indexer does with each event in Postgres (its own writer)."""
    await pg.upsert([PgRow(rec=LogRecord(event=e), tier="hot", embedded=False) for e in events])


async def published(nats_url: str, topology: Topology, category: str) -> list[MemoryEvent]:
    """Every event the API published on a category's subject, oldest first."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await ensure_streams(js, topology)
        info = await js.stream_info(topology.events_stream,
                                    subjects_filter=topology.events_subject(category))
        n = (info.state.subjects or {}).get(topology.events_subject(category), 0)
        if not n:
            return []
        sub = await js.pull_subscribe(topology.events_subject(category), durable=None,
                                      stream=topology.events_stream,
                                      config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL))
        out: list[MemoryEvent] = []
        while len(out) < n:
            for msg in await sub.fetch(n - len(out), timeout=5):
                out.append(MemoryEvent.model_validate_json(msg.data))
        return out
    finally:
        await nc.close()


async def recall(c: httpx.AsyncClient, query: str, ns: str) -> dict[str, Any]:
    r = await c.post("/memory/recall", json={"query": query, "namespace": ns, "timeframe": "all"})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


# --- learned patterns --------------------------------------------------------------------------
async def test_patterns_learned_from_watcher_events_reach_the_user_profile(
        settings: Settings, topology: Topology, nats_url: str, pg: PgStore) -> None:
    ns = "patterns"
    events = World(ns).three_weeks()
    await index(pg, events)
    ids = {e.id: e for e in events}
    async with api(settings) as c:
        r = await c.post("/memory/patterns/refresh", json={"namespace": ns})
        assert r.status_code == 200, r.text
        stored = {p["summary"]: p for p in r.json()["stored"]}
        assert "User's work sessions: Mon–Fri 09:00–12:00, 14:00–15:00, 17:00–18:00 (UTC)" \
            in stored
        editor = stored["User prefers neovim as their editor"]
        assert editor["observations"] == 13 and editor["confidence"] == round(13 / 15, 3)
        # Every pattern cites memories that exist, of the right kind.
        assert all(ids[i].metadata.model_extra["process"] == "nvim"  # type: ignore[index]
                   for i in editor["evidence"])
        weekly = 'User asks: "check the nightly backup report" every Mon around 09:00 (UTC)'
        assert {ids[i].summary for i in stored[weekly]["evidence"]} == {
            "user: check the nightly backup report"}

        # What was published is what the pipeline stores: index it, and recall shows it.
        out = await published(nats_url, topology, "user_pattern")
        assert {e.summary for e in out} == set(stored)
        assert all(e.id.startswith("pattern-") and e.metadata.model_extra["learned"]  # type: ignore[index]
                   for e in out)
        await index(pg, out)
        body = await recall(c, "what failed overnight?", ns)
        profile = body["system_memory"].split("<user_profile>")[1]
        assert "- User prefers neovim as their editor" in profile
        assert "- User&#x27;s work sessions" in profile or "- User's work sessions" in profile

        # Learning again from the same memories stores nothing new (same ids, same evidence).
        again = await c.post("/memory/patterns/refresh", json={"namespace": ns})
        assert again.json()["stored"] == []

        # The user states a new preference: it supersedes the learned one (same subject), the
        # profile shows the statement, and the next refresh does not bring vim/neovim back.
        r = await c.post("/memory/store", json={
            "summary": "The user now prefers helix as their editor", "category": "user_pattern",
            "subcategory": "preference", "namespace": ns})
        stated = (await published(nats_url, topology, "user_pattern"))[-1]
        assert stated.metadata.model_extra["subject"] == "prefers:editor"  # type: ignore[index]
        await index(pg, [stated])
        profile = (await recall(c, "which editor?", ns))["system_memory"]
        assert "helix" in profile and "User prefers neovim as their editor" not in profile
        assert (await c.post("/memory/patterns/refresh", json={"namespace": ns})).json()[
            "stored"] == []


# --- supersede ---------------------------------------------------------------------------------
async def test_a_superseded_fact_ranks_below_unless_history_is_asked(
        settings: Settings, topology: Topology, nats_url: str, pg: PgStore) -> None:
    ns = "facts"
    now = datetime.now(UTC)
    old = MemoryEvent(id="port-old", namespace=ns, timestamp=now - timedelta(days=3),
                      category="conversation", subcategory="note",
                      summary="The staging database listens on port 5432")
    await index(pg, [old])
    async with api(settings) as c:
        missing = await c.post("/memory/supersede", json={
            "old_id": "nope", "namespace": ns, "new": {"summary": "x"}})
        assert missing.status_code == 404
        r = await c.post("/memory/supersede", json={
            "old_id": "port-old", "namespace": ns,
            "new": {"summary": "The staging database now listens on port 6543", "id": "port-new"}})
        assert r.status_code == 200 and r.json()["ids"] == ["port-new"], r.text
        [new] = [e for e in await published(nats_url, topology, "conversation")
                 if e.id == "port-new"]
        assert new.metadata.model_extra["supersedes"] == ["port-old"]  # type: ignore[index]
        assert (new.category, new.subcategory) == ("conversation", "note")
        await index(pg, [new])
        now_body = await recall(c, "which port does the staging database listen on?", ns)
        assert [m["id"] for m in now_body["memories"]] == ["port-new"]  # the old one: history
        history = await recall(c, "which port did the staging database use before?", ns)
        old_hit = [m for m in history["memories"] if m["id"] == "port-old"]
        assert old_hit and old_hit[0]["metadata"]["superseded_by"] == memory_key(ns, "port-new")
        assert "(conversation, superseded) The staging database listens on port 5432" \
            in history["system_memory"]


# --- continuity --------------------------------------------------------------------------------
async def test_warm_answers_the_session_start_bundle_and_session_end_stores_a_summary(
        settings: Settings, topology: Topology, nats_url: str, pg: PgStore) -> None:
    ns, machine = "agent-1", "default"
    now = datetime.now(UTC)
    settings.memory_dir.mkdir(parents=True, exist_ok=True)
    (settings.memory_dir / "MEMORY.md").write_text("# Memory\n- The NAS is at 10.0.0.5\n")
    session = "sess-42"
    turns = [("user", "The nightly backup to the NAS failed again. Can you check the rsync logs?"),
             ("assistant", "The rsync logs show exit code 23: permission denied on /srv/photos."),
             ("user", "Then fix the permissions please."),
             ("assistant", "Fixed: I ran `chown -R backup /srv/photos` and the backup went through. "
                           "We decided to alert on rsync exit codes from now on.")]
    events = [MemoryEvent(id=f"t{i}", namespace=ns, timestamp=now - timedelta(minutes=30 - i),
                          category="conversation", subcategory="flush",
                          actor="user" if role == "user" else "agent", source="flush",
                          summary=f"{role}: {text}", metadata={"session": session})
              for i, (role, text) in enumerate(turns)]
    events += [
        MemoryEvent(id="disk", namespace=machine, timestamp=now - timedelta(hours=2),
                    category="system.storage", subcategory="space_warning",
                    summary="/srv at 93% full", metadata={"severity": "warning"}),
        MemoryEvent(id="old", namespace=machine, timestamp=now - timedelta(days=5),
                    category="system.service", subcategory="fail",
                    summary="cups.service failed", metadata={"severity": "error"}),
        MemoryEvent(id="quiet", namespace=machine, timestamp=now - timedelta(hours=1),
                    category="system.service", subcategory="start", summary="nginx started")]
    await index(pg, events)
    async with api(settings) as c:
        end = await c.post("/memory/session/end", json={"sessionId": session, "namespace": ns})
        assert end.status_code == 200 and end.json()["stored"], end.text
        summary = end.json()
        assert summary["summary"].startswith("Session summary (4 turns, 2 by the user): The "
                                             "nightly backup to the NAS failed again.")
        assert "Commands: chown -R backup /srv/photos" in summary["detail"]
        [stored] = await published(nats_url, topology, "conversation")
        assert stored.id == summary["id"] and stored.subcategory == "session_summary"
        assert stored.metadata.model_extra["session"] == session  # type: ignore[index]
        await index(pg, [stored])
        # Nothing to summarise: nothing stored.
        none = await c.post("/memory/session/end", json={"sessionId": "empty", "namespace": ns})
        assert none.json()["stored"] is False

        # Recall finds the summary by what the session was about.
        body = await recall(c, "what did we do about the NAS backup?", ns)
        assert summary["id"] in [m["id"] for m in body["memories"]]

        # The next session starts with it, today's machine warnings and MEMORY.md.
        w = await c.post("/memory/warm", json={"sessionId": "next", "namespace": ns,
                                               "namespaces": [ns, machine]})
        assert w.status_code == 200, w.text
        warm = w.json()
        assert warm["warmed"]["postgres"] and warm["warmed"]["bundle"]
        assert warm["warmed"]["term_stats"] and warm["warmed"]["embedder"] is False  # no embedder
        bundle = warm["bundle"]
        assert bundle["last_session"]["id"] == summary["id"]
        assert [e["id"] for e in bundle["essentials"]] == ["disk"]  # not 5 days old, not info
        assert bundle["memory_md"].startswith("# Memory")
        text = warm["session_context"]
        assert text.startswith("<session_context>") and "/srv at 93% full" in text
        assert "The NAS is at 10.0.0.5" in text and "Session summary (4 turns" in text


async def test_the_background_refresh_runs_on_its_period(
        settings: Settings, topology: Topology, nats_url: str, pg: PgStore) -> None:
    await index(pg, World("bg").three_weeks())
    s = settings.model_copy(update={"patterns_first_delay_s": 0.0,
                                    "patterns_detection_interval_s": 3600.0})

    async def learned() -> list[MemoryEvent]:
        return await published(nats_url, topology, "user_pattern")

    async with api(s):
        from waiting import wait_for
        found = await wait_for(learned, timeout=30, what="patterns from the background refresh")
    assert {e.namespace for e in found} == {"bg"}
    assert any(e.summary == "User prefers neovim as their editor" for e in found)
