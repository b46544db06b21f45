"""Every route of the recall API, as the app declares it, answered without the bearer token:
401 for all but the few public ones, and those hold no memory, no namespace's name and no
secret. A route added later is covered without touching this test."""

from __future__ import annotations

from typing import Any

import httpx
from starlette.routing import Mount
from test_recall_api import FakeWorld, _client
from totalrecall_recall_api.app import PUBLIC_PATHS, create_app, is_public
from totalrecall_recall_api.settings import Settings

TOKEN = "s3cret-token-value"
MARKER = "zebra-marker-7731"
NAMESPACE = "tenant-orchid"


def _walk(routes: Any, out: list[tuple[str, str]]) -> None:
    for r in routes:
        if isinstance(r, Mount):
            out.append(("GET", r.path + "/"))
            continue
        inner = getattr(getattr(r, "original_router", None), "routes", None)
        if inner is not None:  # an included router
            _walk(inner, out)
            continue
        path = getattr(r, "path", None)
        for method in sorted(getattr(r, "methods", None) or ()):
            if path and method != "HEAD":
                out.append((method, path.replace("{", "x").replace("}", "")))


def _routes() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    _walk(create_app(Settings(api_token=TOKEN)).routes, out)
    return sorted(set(out))


async def _seeded() -> httpx.AsyncClient:
    world = FakeWorld()
    c = await _client(world, api_token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = await c.post("/memory/ingest", headers=auth,
                     json={"summary": f"nginx failed {MARKER}", "namespace": NAMESPACE})
    assert r.status_code == 200, r.text
    await c.post("/memory/recall", headers=auth, json={"query": "nginx", "namespace": NAMESPACE})
    return c


async def test_every_route_needs_the_token_but_the_public_ones() -> None:
    routes = _routes()
    assert len(routes) > 20  # the whole API, not a handful
    c = await _seeded()
    answered: dict[str, Any] = {}
    for method, path in routes:
        r = await c.request(method, path, json={} if method in ("POST", "PUT") else None)
        if is_public(path) or path in ("/health", "/memory/health"):
            assert r.status_code != 401, (method, path)
            answered[f"{method} {path}"] = r.status_code
            for secret in (MARKER, NAMESPACE, TOKEN):
                assert secret not in r.text, (method, path, secret)
        else:
            assert r.status_code == 401, (method, path, r.status_code)
            assert r.headers.get("www-authenticate") == "Bearer"
    assert {"GET /metrics", "GET /openapi.json", "GET /ui/"} <= set(answered)


async def test_a_probe_without_the_token_gets_the_status_only() -> None:
    c = await _seeded()
    for path in ("/health", "/memory/health"):
        r = await c.get(path)
        assert r.status_code in (200, 503)
        assert set(r.json()) <= {"status"}, r.json()


def test_the_public_list_is_short_and_named() -> None:
    assert {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc",
                            "/metrics"} == PUBLIC_PATHS
    assert not is_public("/memory/recall") and not is_public("/uix")
    assert not is_public("/anything-new")
