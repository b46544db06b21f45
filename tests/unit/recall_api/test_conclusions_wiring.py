"""What a conversation concluded, through the HTTP layer with fakes: ingest and flush publish the
derived memories with the turns; recall ranks them first and the profile shows what the user
stated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from test_recall_api import FakeWorld, _client
from totalrecall_recall_api.sessions import conclusion_extractor as wiring
from totalrecall_schema import Memory, MemoryEvent

NOW = datetime.now(UTC)


class World(FakeWorld):
    """The fake world whose rows carry their subcategory and metadata (the real store's do)."""

    def _memory(self, e: MemoryEvent) -> Memory:
        m = super()._memory(e)
        m.subcategory = e.subcategory
        m.metadata = e.metadata.model_dump(mode="json", exclude_none=True)
        return m

    def derived(self) -> list[MemoryEvent]:
        return [e for e in self.events.values()
                if (e.metadata.model_extra or {}).get("derived_from")]


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
async def client(world: World) -> AsyncIterator[httpx.AsyncClient]:
    c = await _client(world, profile_cache_s=0)
    yield c
    await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


def _at(minutes: float) -> str:
    return (NOW - timedelta(minutes=minutes)).isoformat()


CONVERSATION = [
    {"id": "u1", "actor": "user", "summary": "The nightly backup to the NAS failed again.",
     "timestamp": _at(30), "metadata": {"session": "s1"}},
    {"id": "a1", "actor": "agent", "timestamp": _at(29), "metadata": {"session": "s1"},
     "summary": "assistant: The backup failed because the NAS share was mounted read-only. "
                "Shall I remount it read-write?"},
    {"id": "u2", "actor": "user", "summary": "Yes, go ahead.", "timestamp": _at(28),
     "metadata": {"session": "s1"}},
    {"id": "a2", "actor": "agent", "timestamp": _at(27), "metadata": {"session": "s1"},
     "summary": "I remounted /mnt/nas read-write and restarted backup.service; it went through."},
    {"id": "u3", "actor": "user", "timestamp": _at(26), "metadata": {"session": "s1"},
     "summary": "Thanks. I prefer rsync over scp for the backups, always keep it that way."},
]


async def test_ingest_publishes_the_conclusions_with_the_turns(client: httpx.AsyncClient,
                                                               world: World) -> None:
    r = await client.post("/memory/ingest", json=CONVERSATION)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ids"] == ["u1", "a1", "u2", "a2", "u3"] and body["accepted"] == 5
    derived = {e.id: e for e in world.derived()}
    assert sorted(body["derived"]) == sorted(derived) and len(derived) == 4
    by_rule = {e.metadata.model_extra["rule"]: e for e in derived.values()}  # type: ignore[index]
    assert set(by_rule) == {"diagnosis.because", "approval.go_ahead", "fix.restarted",
                            "preference.prefer"}
    cause = by_rule["diagnosis.because"]
    assert (cause.category, cause.subcategory) == ("diagnosis", "root_cause")
    assert cause.summary == "The backup failed because the NAS share was mounted read-only."
    assert cause.metadata.model_extra["derived_from"] == "a1"  # type: ignore[index]
    assert cause.metadata.model_extra["session"] == "s1"  # type: ignore[index]
    assert cause.actor == "agent" and cause.timestamp == world.events[
        next(k for k, e in world.events.items() if e.id == "a1")].timestamp
    ok = by_rule["approval.go_ahead"]
    assert (ok.category, ok.subcategory, ok.actor) == ("approval", "granted", "user")
    # what was approved: the agent's turn before it in the same session
    assert ok.detail.startswith("In reply to: The backup failed because") \
        and "Shall I remount it read-write?" in ok.detail
    assert by_rule["fix.restarted"].subcategory == "resolution"
    assert by_rule["preference.prefer"].category == "user_pattern"

    # Ingested again (a retry, a redelivery): the same ids, nothing new.
    again = (await client.post("/memory/ingest", json=CONVERSATION)).json()
    assert again["derived"] == body["derived"] and again["duplicates"] == 5
    assert len(world.events) == 9


async def test_only_conversation_turns_are_read(client: httpx.AsyncClient, world: World) -> None:
    r = await client.post("/memory/ingest", json=[
        {"summary": "nginx failed because port 80 was in use", "category": "system.service"},
        {"summary": "The fix was to stop apache first.", "category": "conversation",
         "subcategory": "note"},
        {"summary": "Root cause: the disk was full.", "category": "diagnosis"},
        {"summary": "Yes, go ahead.", "category": "conversation"}])  # no speaker known
    assert r.status_code == 200 and r.json()["derived"] == []
    assert world.derived() == []
    # /memory/store is the agent's own "remember this": stored as given
    r = await client.post("/memory/store", json={"summary": "The fix was to stop apache first."})
    assert r.json()["derived"] == []


async def test_flush_derives_and_keeps_a_short_decision(client: httpx.AsyncClient,
                                                        world: World) -> None:
    msgs = {"sessionId": "sess-9", "namespace": "agent-1", "messages": [
        {"role": "assistant", "content": "Shall I upgrade the kernel to 6.8 now?"},
        {"role": "user", "content": "Stop."},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": [{"type": "text", "text":
                                           "Understood. The upgrade failed because /boot is full."}]},
        {"role": "user", "content": "Actually, /boot is 512 MB, not 1 GB."}]}
    first = (await client.post("/memory/flush", json=msgs)).json()
    assert first["accepted"] == 4  # "ok" says nothing; "Stop." decides something
    derived = world.derived()
    assert {(e.category, e.subcategory) for e in derived} == {
        ("approval", "denied"), ("diagnosis", "root_cause"), ("user_pattern", "correction")}
    stop = next(e for e in derived if e.category == "approval")
    assert stop.summary == "Stop." and stop.namespace == "agent-1"
    assert stop.metadata.model_extra["decision"] == "refused"  # type: ignore[index]
    assert stop.metadata.model_extra["session"] == "sess-9"  # type: ignore[index]
    assert stop.detail == "In reply to: Shall I upgrade the kernel to 6.8 now?"
    turn_ids = set(first["ids"])
    assert all(e.metadata.model_extra["derived_from"] in turn_ids  # type: ignore[index]
               for e in derived)
    second = (await client.post("/memory/flush", json=msgs)).json()
    assert second["derived"] == first["derived"] and second["duplicates"] == 4


async def test_a_failing_extraction_never_fails_the_ingest(client: httpx.AsyncClient,
                                                           world: World,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    def broken(*_: Any, **__: Any) -> list[MemoryEvent]:
        raise RuntimeError("bad turn")

    monkeypatch.setattr(wiring, "derive", broken)
    r = await client.post("/memory/ingest", json=CONVERSATION[:2])
    assert r.status_code == 200 and r.json()["accepted"] == 2 and r.json()["derived"] == []
    metrics = (await client.get("/metrics")).text
    assert "totalrecall_recall_conclusion_errors_total 2.0" in metrics


async def test_a_huge_turn_is_stored_with_what_it_concluded(client: httpx.AsyncClient,
                                                            world: World) -> None:
    detail = ("The deploy failed because the registry was unreachable. " + "x" * 31_000)
    r = await client.post("/memory/ingest", json={
        "summary": "assistant: a long report", "detail": detail, "actor": "agent"})
    assert r.status_code == 200, r.text
    [d] = world.derived()
    assert d.summary == "The deploy failed because the registry was unreachable."
    metrics = (await client.get("/metrics")).text
    assert 'totalrecall_recall_conclusions_total{rule="diagnosis.because"} 1.0' in metrics


async def test_conclusions_can_be_turned_off(world: World) -> None:
    c = await _client(world, conclusions_enable=False)
    try:
        r = await c.post("/memory/ingest", json=CONVERSATION)
        assert r.json()["derived"] == [] and world.derived() == []
        r = await c.post("/memory/flush", json={"sessionId": "s", "messages": [
            {"role": "user", "content": "Stop."}]})
        assert r.json()["accepted"] == 0
    finally:
        await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def test_recall_ranks_the_conclusion_first_and_the_profile_shows_the_preference(
        client: httpx.AsyncClient, world: World) -> None:
    await client.post("/memory/ingest", json=[
        {"summary": "User's work sessions: Mon–Fri 09:00–12:00 (UTC)", "category": "user_pattern",
         "subcategory": "work_session", "timestamp": _at(600),
         "metadata": {"subject": "schedule:work_sessions", "learned": True}},
        *CONVERSATION])
    body = (await client.post("/memory/recall", json={
        "query": "what did we conclude about the NAS backup?"})).json()
    ids = [m["id"] for m in body["memories"]]
    cause = next(m for m in body["memories"] if m["metadata"].get("derived_from") == "a1")
    assert ids.index(cause["id"]) < ids.index("a1"), ids
    # what was concluded leads: the question asks for it
    assert body["memories"][0]["metadata"].get("derived_from")
    assert "intent" in body["memories"][0]["metadata"]["_scores"]  # core/intent.py
    body = (await client.post("/memory/recall", json={
        "query": "what does the user prefer for backups?"})).json()
    first = body["memories"][0]
    assert first["metadata"]["derived_from"] == "u3" and first["category"] == "user_pattern"

    # The profile: the stated preference, newest first (when it is not recalled already).
    body = (await client.post("/memory/recall", json={"query": "holiday plans?"})).json()
    assert body["memories"] == []
    profile = body["system_memory"].split("<user_profile>")[1]
    assert "- The user said (preference): I prefer rsync over scp for the backups" in profile
    assert profile.index("The user said") < profile.index("User's work sessions")

    # A newer statement of the same subject replaces the older one in the profile.
    await client.post("/memory/ingest", json={
        "id": "u9", "actor": "user", "summary": "From now on I prefer borg for the backups.",
        "timestamp": _at(1), "metadata": {"session": "s2"}})
    body = (await client.post("/memory/recall", json={"query": "holiday plans?"})).json()
    profile = body["system_memory"].split("<user_profile>")[1]
    assert "From now on I prefer borg for the backups." in profile and "rsync" not in profile


async def test_the_profile_shows_a_few_statements_at_most(world: World) -> None:
    c = await _client(world, profile_cache_s=0, profile_max_stated=2)
    try:
        for i in range(4):
            await c.post("/memory/ingest", json={
                "id": f"p{i}", "actor": "user", "timestamp": _at(10 - i),
                "summary": f"Always run the linter number {i} before committing."})
        body = (await c.post("/memory/recall", json={"query": "holiday plans?"})).json()
        profile = body["system_memory"].split("<user_profile>")[1]
        assert "number 3" in profile and "number 2" in profile
        assert "number 1" not in profile and "number 0" not in profile
    finally:
        await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def test_a_conclusion_stands_before_its_turn_whatever_the_question(
        client: httpx.AsyncClient, world: World) -> None:
    await client.post("/memory/ingest", json=CONVERSATION)
    body = (await client.post("/memory/recall", json={"query": "NAS share read-only"})).json()
    ids = [m["id"] for m in body["memories"]]
    cause = next(m["id"] for m in body["memories"] if m["metadata"].get("derived_from") == "a1")
    assert ids.index(cause) < ids.index("a1"), ids
    body = (await client.post("/memory/recall", json={
        "query": "did I approve the remount of the NAS?"})).json()
    first = body["memories"][0]
    assert first["category"] == "approval" and first["summary"] == "Yes, go ahead.", ids


async def test_a_turn_said_again_whole_by_its_conclusion_is_shown_once(
        client: httpx.AsyncClient, world: World) -> None:
    await client.post("/memory/ingest", json=[
        *CONVERSATION,
        {"id": "a3", "actor": "agent", "timestamp": _at(25), "metadata": {"session": "s1"},
         "summary": "The root cause was an expired SSH key on the NAS backup target."}])
    body = (await client.post("/memory/recall", json={
        "query": "what was the root cause of the NAS backup failure?"})).json()
    ids = [m["id"] for m in body["memories"]]
    summaries = [m["summary"] for m in body["memories"]]
    sentence = "The root cause was an expired SSH key on the NAS backup target."
    assert summaries.count(sentence) == 1 and "a3" not in ids, ids
    shown = next(m for m in body["memories"] if m["summary"] == sentence)
    assert shown["category"] == "diagnosis" and shown["metadata"]["derived_from"] == "a3"
    assert body["system_memory"].count(sentence) == 1
    # a turn that says more than what it concluded is still shown beside its conclusion
    assert "a1" in ids
