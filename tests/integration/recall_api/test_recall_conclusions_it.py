"""What a conversation concluded, through the recall API on a real nats-server and a real
Postgres: the turns are ingested (and flushed), the memories derived from them are read back from
JetStream with the turns and stored by the indexer's own Postgres writer (its migrations, its
supersede marking), and recall answers "what did we conclude about …" / "what does the user
prefer for …" with them first and shows the stated preference in `<user_profile>`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from test_recall_continuity_it import api, index, pg, published, recall, settings
from totalrecall_indexer.adapters.pgstore import PgStore
from totalrecall_recall_api.settings import Settings
from totalrecall_schema import MemoryEvent, Topology

__all__ = ["pg", "settings"]  # the fixtures, shared with the continuity tests

CATEGORIES = ("conversation", "diagnosis", "approval", "user_pattern")


async def _published(nats_url: str, topology: Topology) -> list[MemoryEvent]:
    out: list[MemoryEvent] = []
    for category in CATEGORIES:
        out += await published(nats_url, topology, category)
    return out


def _derived(events: list[MemoryEvent]) -> dict[str, MemoryEvent]:
    return {e.id: e for e in events if (e.metadata.model_extra or {}).get("derived_from")}


async def test_a_conversations_conclusions_are_recalled_first_and_profiled(
        settings: Settings, topology: Topology, nats_url: str, pg: PgStore) -> None:
    ns = "concl"
    then = datetime.now(UTC) - timedelta(days=2)

    def turn(i: int, actor: str, text: str) -> dict[str, object]:
        return {"id": f"t{i}", "namespace": ns, "actor": actor, "summary": text,
                "timestamp": (then + timedelta(minutes=i)).isoformat(),
                "metadata": {"session": "s1"}}

    conversation = [
        turn(1, "user", "The nightly backup to the NAS failed again, can you look at it?"),
        turn(2, "agent", "I checked the rsync logs. The backup failed because the NAS share "
                         "was mounted read-only after the firmware update. Shall I remount it?"),
        turn(3, "user", "Yes, go ahead."),
        turn(4, "agent", "I remounted /mnt/nas read-write and restarted backup.service; the "
                         "backup went through."),
        turn(5, "user", "Thanks. I prefer docker for containers, by the way."),
    ]
    async with api(settings) as c:
        r = await c.post("/memory/ingest", json=conversation)
        assert r.status_code == 200, r.text
        assert r.json()["accepted"] == 5 and len(r.json()["derived"]) == 4

        # A later session, flushed before compaction (the plugin's path): a newer preference of
        # the same subject.
        r = await c.post("/memory/flush", json={"sessionId": "s2", "namespace": ns, "messages": [
            {"role": "assistant", "content": "Which container runtime should I use for the "
                                             "new services?"},
            {"role": "user", "content": "From now on I prefer podman for containers."}]})
        assert r.status_code == 200 and len(r.json()["derived"]) == 1, r.text

        # Everything went out through JetStream, each on its category's subject, once.
        out = await _published(nats_url, topology)
        derived = _derived(out)
        assert len(out) == 7 + 5 and len(derived) == 5
        by_rule = {str(e.metadata.model_extra["rule"]): e  # type: ignore[index]
                   for e in derived.values()}
        cause = by_rule["diagnosis.because"]
        assert cause.summary == ("The backup failed because the NAS share was mounted read-only "
                                 "after the firmware update.")
        assert cause.metadata.model_extra["derived_from"] == "t2"  # type: ignore[index]
        assert cause.metadata.model_extra["session"] == "s1"  # type: ignore[index]
        podman = next(e for e in derived.values() if "podman" in e.summary)
        assert podman.metadata.model_extra["subject"] == "prefers:containers"  # type: ignore[index]

        # Ingested again (a client's retry): the same memories, no new ones.
        again = await c.post("/memory/ingest", json=conversation)
        assert again.json()["duplicates"] == 5
        assert sorted(again.json()["derived"]) == sorted(
            i for i, e in derived.items() if e.metadata.model_extra["session"] == "s1")  # type: ignore[index]
        assert len(await _published(nats_url, topology)) == 12

        # The indexer stores them (oldest first, as they were said).
        await index(pg, sorted(out, key=lambda e: e.timestamp))

        body = await recall(c, "what did we conclude about the NAS backup?", ns)
        ids = [m["id"] for m in body["memories"]]
        assert body["memories"][0]["metadata"].get("derived_from"), ids
        assert ids.index(cause.id) < min(ids.index(t) for t in ("t1", "t2") if t in ids), ids
        # The user's stated preference is in the profile (the newest one only: same subject).
        profile = body["system_memory"].split("<user_profile>")[1]
        assert ("- The user said (preference): From now on I prefer podman for containers."
                in profile), profile
        assert "docker" not in profile

        body = await recall(c, "what does the user prefer for containers?", ns)
        first = body["memories"][0]
        assert first["id"] == podman.id and first["category"] == "user_pattern", body["memories"]
        # the older stated preference is superseded (its turn stays, verbatim)
        assert not any("docker" in m["summary"] for m in body["memories"]
                       if m["category"] == "user_pattern"), body["memories"]

        # The older preference is history: asked for, it comes back marked.
        history = await recall(c, "which container runtime did the user prefer before?", ns)
        assert any("I prefer docker" in m["summary"] and m["metadata"].get("superseded_by")
                   for m in history["memories"]), history["memories"]
