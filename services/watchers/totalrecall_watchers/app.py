"""`create_app(settings)`: the watchers, the publisher, /health and /metrics in one ASGI app.

The object graph comes from `container.build`; the lifespan starts the publisher, then the
watchers' loops (`lifecycle.WatcherRunner`), and stops them in the reverse order."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .adapters.publisher import Publisher
from .container import build
from .core.base import Clock, Watcher
from .metrics import Metrics
from .settings import Settings

log = logging.getLogger("totalrecall_watchers")


def create_app(settings: Settings, *, publisher: Publisher | None = None,
               clock: Clock | None = None, watchers: list[Watcher] | None = None,
               metrics: Metrics | None = None) -> Starlette:
    """The test doubles are those of `container.build`. Nothing is started here."""
    c = build(settings, publisher=publisher, clock=clock, watchers=watchers, metrics=metrics)
    runner, publisher_, limiter = c.runner, c.publisher, c.limiter
    started = {"ok": False}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await publisher_.start()
        await runner.start()
        started["ok"] = True
        try:
            yield
        finally:
            started["ok"] = False
            await runner.stop()
            await publisher_.stop()

    async def health(request: Request) -> JSONResponse:
        watchers_h = runner.health()
        nats_h = publisher_.health()
        failed = [n for n, w in watchers_h.items() if w["state"] == "failed"]
        status = "ok" if nats_h.get("connected") and not failed else "degraded"
        body = {"status": status if started["ok"] else "starting", "service": "watchers",
                "nats": nats_h, "watchers": watchers_h, "rate_limit": limiter.snapshot()}
        return JSONResponse(body, status_code=200 if started["ok"] else 503)

    async def metrics_endpoint(request: Request) -> Response:
        runner.export_stats()
        return Response(generate_latest(c.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app = Starlette(routes=[Route("/health", health), Route("/metrics", metrics_endpoint)],
                    lifespan=lifespan)
    app.state.container = c
    app.state.runner = runner
    app.state.publisher = publisher_
    app.state.limiter = limiter
    app.state.metrics = c.metrics
    app.state.settings = settings
    return app
