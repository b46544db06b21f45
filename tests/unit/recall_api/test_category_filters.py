"""Category filters: a category of the taxonomy or a family written as a prefix (`system.*`),
expanded once into the taxonomy's categories before any path filters by it (core/categories.py).

The fake store below filters as the real ones do: the vector index checks its filter as the
indexer does (`tier_filter`, which refuses a `*`) and keeps the hits of the categories named, the
store's keyword search and lookups keep the rows whose category is one of those it is given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import httpx
import pytest
from test_recall_api import NOW, FakeWorld, _client
from totalrecall_indexer.core.search import tier_filter
from totalrecall_recall_api.adapters.postgres import any_of
from totalrecall_recall_api.core.categories import (
    UnknownCategory,
    categories_of,
    category_list,
)
from totalrecall_recall_api.ports import Row
from totalrecall_schema import CATEGORIES, MemoryEvent, VectorSearchReply, VectorSearchRequest

SYSTEM = tuple(c for c in CATEGORIES if c.startswith("system."))


def test_a_category_names_itself() -> None:
    assert categories_of("system.service") == ("system.service",)
    assert categories_of("conversation") == ("conversation",)
    assert categories_of(None) is None and categories_of("") is None  # no filter
    assert category_list(None) is None and category_list("error") == ["error"]


def test_a_family_names_every_category_of_its_prefix() -> None:
    assert SYSTEM and categories_of("system.*") == SYSTEM
    assert "system.service" in SYSTEM and "system.process" in SYSTEM
    assert categories_of("agent.*") == ("agent.action",)
    assert category_list("system.*") == list(SYSTEM)
    # Every value passes the indexer's check of what it pastes into Zvec's filter.
    for pattern in ("system.*", "agent.*", "error"):
        tier_filter(VectorSearchRequest(vector=[1.0], filter={
            "namespace": "default", "categories": category_list(pattern)}).filter)


@pytest.mark.parametrize(("pattern", "reason"), [
    ("system", "its family: 'system.*'"),  # a family is written with `.*`
    ("bogus", "unknown category 'bogus'"),
    ("System.service", "unknown category"),  # categories are lower case, as on ingest
    ("sys.*", "matches no category"),  # a family is a whole prefix of dotted names
    ("system.serv*", "unknown category"),
    ("conversation.*", "matches no category"),
    (".*", "matches no category"),
    ("*", "unknown category"),
    ("*.*", "matches no category"),
])
def test_a_filter_that_names_no_category_is_refused_with_the_reason(pattern: str,
                                                                    reason: str) -> None:
    with pytest.raises(UnknownCategory, match="expected one of") as err:
        categories_of(pattern)
    assert reason in str(err.value) and "system.*" in str(err.value)


# --- through the API ---------------------------------------------------------------------------
def _matches(category: str, flt: str | Sequence[str] | None) -> bool:
    cats = any_of(flt)
    return cats is None or category in cats


class Filtering(FakeWorld):
    """A world whose index and store filter by category as the real ones do; records what the
    store was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: dict[str, list[Any]] = {}

    def _ask(self, what: str, category: Any) -> None:
        self.asked.setdefault(what, []).append(category)

    async def search(self, request: VectorSearchRequest) -> VectorSearchReply:
        flt = tier_filter(request.filter)  # the indexer's own check: raises on a pattern
        reply = await super().search(request)
        reply.hits = [h for h in reply.hits if flt.categories is None
                      or h.category in flt.categories]
        return reply

    async def bm25(self, terms: Sequence[str], namespace: str, since: Any, category: Any,
                   limit: int) -> list[tuple[str, float]]:
        self._ask("bm25", category)
        return [(k, r) for k, r in await super().bm25(terms, namespace, since, None, 10_000)
                if _matches(self.events[k].category, category)][:limit]

    async def neighbours(self, keys: Sequence[str], window: int, max_gap_s: float,
                         since: Any = None, category: Any = None, event_gap_s: Any = None,
                         known: Any = ()) -> dict[str, list[tuple[str, Row | None]]]:
        self._ask("neighbours", category)
        found = await super().neighbours(keys, window, max_gap_s, since, None, event_gap_s, known)
        return {hit: [(k, m) for k, m in rows if _matches(self.events[k].category, category)]
                for hit, rows in found.items()}

    async def newest_of_templates(self, namespace: str, templates: Sequence[str], since: Any,
                                  until: Any, category: Any, per_template: int) -> list[Row]:
        self._ask("repeats", category)
        return []

    async def recent(self, namespace: str, since: Any, category: Any, limit: int,
                     categories: Any = None) -> list[Any]:
        if category != "user_pattern":  # the profile's own lookup
            self._ask("recent", (category, categories))
        return await super().recent(namespace, since, category, limit, categories)


EVENTS = [
    ("svc", "system.service", "nginx failed: port 80 already in use"),
    ("proc", "system.process", "nginx worker process crashed with signal 11"),
    ("talk", "conversation", "we talked about nginx and port 80 with the user"),
    ("err", "error", "nginx config error in sites-enabled/default"),
    ("act", "agent.action", "restarted nginx after the port 80 clash"),
]


@pytest.fixture
async def world() -> AsyncIterator[Filtering]:
    w = Filtering()
    await w.publish([MemoryEvent(id=i, category=cat, summary=s,
                                 timestamp=NOW - timedelta(minutes=10 + n),
                                 metadata={"session": "s1"})
                     for n, (i, cat, s) in enumerate(EVENTS)])
    yield w


@pytest.fixture
async def client(world: Filtering) -> AsyncIterator[httpx.AsyncClient]:
    c = await _client(world, profile_cache_s=0)
    yield c
    await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def _recall(client: httpx.AsyncClient, query: str, **kw: Any) -> list[dict[str, Any]]:
    r = await client.post("/memory/recall", json={"query": query, "maxResults": 10,
                                                  "timeframe": "all", **kw})
    assert r.status_code == 200, r.text
    return r.json()["memories"]  # type: ignore[no-any-return]


async def test_a_family_recalls_its_categories_through_every_path(
        client: httpx.AsyncClient, world: Filtering) -> None:
    found = await _recall(client, "nginx port 80", category="system.*")
    assert {m["id"] for m in found} == {"svc", "proc"}
    assert {m["category"] for m in found} <= set(SYSTEM)
    # The index got the family's categories (a pattern in its filter fails the indexer's check).
    assert world.search_requests[-1].filter.categories == list(SYSTEM)
    # So did keyword search, the neighbours' lookup and the repeats' lookup.
    assert world.asked["bm25"][-1] == SYSTEM
    assert world.asked["neighbours"][-1] == SYSTEM
    assert world.asked["repeats"][-1] == SYSTEM


async def test_a_category_and_no_category_recall_as_before(client: httpx.AsyncClient,
                                                           world: Filtering) -> None:
    assert {m["id"] for m in await _recall(client, "nginx port 80", category="error")} == {"err"}
    assert world.search_requests[-1].filter.categories == ["error"]
    assert {m["id"] for m in await _recall(client, "nginx port 80", category="agent.*")} == {"act"}
    everything = await _recall(client, "nginx port 80")
    assert {m["id"] for m in everything} == {i for i, _, _ in EVENTS}
    assert world.search_requests[-1].filter.categories is None
    assert world.asked["bm25"][-1] is None


async def test_a_continuation_and_a_diagnostic_question_take_the_family(
        client: httpx.AsyncClient, world: Filtering) -> None:
    found = await _recall(client, "where were we", category="system.*")
    assert found and {m["category"] for m in found} <= set(SYSTEM)
    assert world.asked["recent"][0] == (None, SYSTEM)  # the session's newest, of the family
    assert world.asked["neighbours"][-1] == SYSTEM  # and its thread
    world.asked.clear()
    await _recall(client, "why did nginx crash?", category="system.*")
    # the diagnostic lookup of what just went wrong: the family, not every system category
    assert (None, list(SYSTEM)) in world.asked["recent"]


@pytest.mark.parametrize(("endpoint", "body"), [("/memory/recall", {"query": "nginx"}),
                                              ("/memory/timeline", {"hours": 24})])
async def test_an_unknown_category_is_a_422_with_the_reason(client: httpx.AsyncClient,
                                                            world: Filtering, endpoint: str,
                                                            body: dict[str, Any]) -> None:
    r = await client.post(endpoint, json={**body, "category": "system"})
    assert r.status_code == 422
    assert "its family: 'system.*'" in r.json()["detail"]
    assert not world.search_requests  # refused before any search


async def test_the_timeline_takes_a_family(client: httpx.AsyncClient) -> None:
    r = await client.post("/memory/timeline", json={"hours": 24, "category": "system.*"})
    assert r.status_code == 200, r.text
    assert [m["id"] for m in r.json()["memories"]] == ["proc", "svc"]  # oldest first
    r = await client.post("/memory/timeline", json={"hours": 24, "category": "conversation"})
    assert [m["id"] for m in r.json()["memories"]] == ["talk"]
