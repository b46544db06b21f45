"""The newest repeats are looked up by the template the store keeps: that of a memory's
summary (the indexer's `template` column), not of its summary and detail together, which is
what recall ranks by. A journal line carries its priority, unit and PID in its detail, so the
two differ for every such memory: looked up by the other, the store found nothing, and the
newest line of a repeated message never joined its older ones."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from test_recall_api import NOW, FakeWorld, _client
from totalrecall_recall_api.ports import Row
from totalrecall_schema import MemoryEvent
from totalrecall_schema.templates import template_hash


class Templates(FakeWorld):
    """A store that keeps each memory's template as the indexer does, and answers the newest
    of each template asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def newest_of_templates(self, namespace: str, templates: Sequence[str], since: Any,
                                  until: Any, category: Any, per_template: int) -> list[Row]:
        self.asked += templates
        found: list[Row] = []
        for t in templates:
            members = sorted((e for e in self.events.values() if e.namespace == namespace
                              and template_hash(e.summary) == t),
                             key=lambda e: e.timestamp, reverse=True)
            found += [self._row(e) for e in members[:per_template]]
        return found


def _line(n: int, minutes_ago: int) -> MemoryEvent:
    return MemoryEvent(
        id=f"bk{n}", category="system.service", source="journal",
        summary=f"backup-x7[{800 + n}]: copied {1200 + n} files to /mnt/archive",
        detail=f"priority: info (6)\nunit: backup-x7.service\npid: {800 + n}",
        timestamp=NOW - timedelta(minutes=minutes_ago),
        metadata={"session": f"login-{n}"})  # not each other's neighbours


async def test_a_journal_lines_newest_repeat_is_found_and_comes_first() -> None:
    world = Templates()
    old, newest = _line(1, 300), _line(2, 1)
    await world.publish([old])
    client = await _client(world, profile_cache_s=0)
    try:
        # Only the old line is searchable yet; the store holds the newest of its template too.
        world.events[newest.key] = newest
        searched = world.bm25

        async def without_newest(terms: Sequence[str], namespace: str, since: Any,
                                 category: Any, limit: int) -> list[tuple[str, float]]:
            return [(k, r) for k, r in await searched(terms, namespace, since, category, limit)
                    if k != newest.key]
        world.bm25 = without_newest  # type: ignore[method-assign]
        world.search = _only(world.search, old.key)  # type: ignore[method-assign]
        r = await client.post("/memory/recall", json={
            "query": "how many files were copied to the archive?", "timeframe": "all"})
        assert r.status_code == 200, r.text
        assert template_hash(old.summary) in world.asked
        ids = [m["id"] for m in r.json()["memories"]]
        assert ids[:1] == [newest.id], ids
    finally:
        await client._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


def _only(search: Any, key: str) -> Any:
    async def only(request: Any) -> Any:
        reply = await search(request)
        reply.hits = [h for h in reply.hits if h.key == key]
        return reply
    return only
