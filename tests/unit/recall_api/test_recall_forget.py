"""POST /memory/forget with fakes: ids map to keys in the request's namespace, errors are clear."""

from __future__ import annotations

from typing import Any

import pytest
from test_recall_api import FakeWorld, _client
from totalrecall_schema import AdminReply, AdminRequest, MemoryEvent
from totalrecall_schema.events import memory_key


class ForgettingWorld(FakeWorld):
    """The indexer's forget over the fake's events: found = the keys it held."""

    def __init__(self) -> None:
        super().__init__()
        self.admin_requests: list[AdminRequest] = []
        self.indexer: str = "up"  # "up" | "gone" (no responders) | "store down"

    async def admin(self, request: AdminRequest, timeout: float) -> AdminReply:
        self.admin_requests.append(request)
        if self.indexer == "gone":
            raise TimeoutError("no responders")
        if self.indexer == "store down":
            return AdminReply(ok=False, error="postgres: ConnectionRefusedError")
        if request.verb != "forget":
            return AdminReply(result={})
        found = [k for k in request.keys or [] if k in self.events
                 and self.events[k].namespace == request.namespace]
        for k in found:
            del self.events[k]
        return AdminReply(result={"forgotten": len(found), "found": found})


@pytest.fixture
def world() -> ForgettingWorld:
    w = ForgettingWorld()
    for ns, i in (("default", "a"), ("default", "b"), ("team", "a")):
        e = MemoryEvent(id=i, namespace=ns, summary=f"memory {i} of {ns}")
        w.events[e.key] = e
    return w


async def _post(world: ForgettingWorld, body: Any) -> Any:
    client = await _client(world)
    try:
        return await client.post("/memory/forget", json=body)
    finally:
        await client._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def test_forget_maps_ids_to_the_keys_of_its_namespace(world: ForgettingWorld) -> None:
    r = await _post(world, {"ids": ["a", "nope", "a"], "namespace": "default"})
    assert r.status_code == 200, r.text
    assert r.json() == {"forgotten": 1, "missing": ["nope"]}
    (req,) = world.admin_requests
    assert req.verb == "forget" and req.namespace == "default"
    assert req.keys == [memory_key("default", "a"), memory_key("default", "nope")]
    # the same id in another namespace is untouched
    assert memory_key("team", "a") in world.events
    assert memory_key("default", "a") not in world.events


async def test_forget_defaults_to_the_default_namespace(world: ForgettingWorld) -> None:
    r = await _post(world, {"ids": ["b"]})
    assert r.json() == {"forgotten": 1, "missing": []}
    assert world.admin_requests[0].namespace == "default"


@pytest.mark.parametrize(("body", "reason"), [
    ({"ids": []}, "ids: List should have at least 1 item"),
    ({}, "ids: Field required"),
    ({"ids": ["a"], "namespace": "no spaces"}, "namespace: String should match pattern"),
    ({"ids": ["bad id!"]}, "ids.0: String should match pattern"),
    ({"ids": ["a"], "keys": ["x"]}, "keys: Extra inputs are not permitted"),
])
async def test_bad_forget_requests_get_a_422_with_the_reason(
        world: ForgettingWorld, body: dict[str, Any], reason: str) -> None:
    r = await _post(world, body)
    assert r.status_code == 422
    assert reason in r.json()["detail"]
    assert world.admin_requests == []


@pytest.mark.parametrize(("state", "detail"), [
    ("gone", "indexer unavailable: TimeoutError"),
    ("store down", "indexer could not forget: postgres: ConnectionRefusedError"),
])
async def test_forget_is_503_while_the_indexer_cannot(world: ForgettingWorld, state: str,
                                                      detail: str) -> None:
    world.indexer = state
    r = await _post(world, {"ids": ["a"]})
    assert r.status_code == 503 and r.json()["detail"] == detail
    assert memory_key("default", "a") in world.events


async def test_forget_needs_the_token_when_one_is_set(world: ForgettingWorld) -> None:
    client = await _client(world, api_token="s3cret")
    try:
        r = await client.post("/memory/forget", json={"ids": ["a"]})
        assert r.status_code == 401
        r = await client.post("/memory/forget", json={"ids": ["a"]},
                              headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 200 and r.json()["forgotten"] == 1
    finally:
        await client._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def test_a_forgotten_preference_leaves_the_cached_profile_at_once(
        world: ForgettingWorld) -> None:
    pref = MemoryEvent(id="pref", category="user_pattern", summary="The user likes tabs")
    world.events[pref.key] = pref
    client = await _client(world, profile_cache_s=3600.0)
    try:
        ask = {"query": "how should this file be indented?", "timeframe": "all"}
        assert "likes tabs" in (await client.post("/memory/recall", json=ask)).json()[
            "system_memory"]
        r = await client.post("/memory/forget", json={"ids": ["pref"]})
        assert r.json()["forgotten"] == 1
        assert "likes tabs" not in (await client.post("/memory/recall", json=ask)).json()[
            "system_memory"]
    finally:
        await client._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]
