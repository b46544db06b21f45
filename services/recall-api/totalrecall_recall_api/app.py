"""create_app(settings): the FastAPI application. No I/O until the lifespan starts
(`lifecycle.running`: the ports connected, the container built, the background loops)."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError as PydanticValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .handlers import health as memory_health
from .handlers import router
from .handlers.ui_files import UI_DIR, UiFiles
from .lifecycle import running
from .metrics import Metrics
from .ports import AlertRows, Embedder, Publisher, Store, VectorIndex
from .settings import Settings


class BodyLimit:
    """Reject bodies over `limit` bytes with 413, whether or not Content-Length is sent."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await JSONResponse({"detail": f"request body over {self.limit} bytes"}, 413)(
                scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await JSONResponse({"detail": f"request body over {self.limit} bytes"}, 413)(
                scope, receive, send)


class _TooLarge(Exception):
    pass


#: What answers without the bearer token, off loopback too: nothing of it holds a memory, a
#: namespace's name or a secret. The API's schema and its documentation pages; the web page's
#: static files (a browser cannot send a token when it loads a page: the page asks for it and
#: sends it with every call, `handlers/ui_files.py`); `/metrics` (counts and latencies per endpoint,
#: stage, tier and alert rule: what a Prometheus on the private network scrapes). `/health` and
#: `/memory/health` answer a probe without a token with their status only. Any other path,
#: a route added later included, needs the token.
PUBLIC_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc",
                          "/metrics"})
PUBLIC_PREFIXES = ("/ui/",)


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path == "/ui" or path.startswith(PUBLIC_PREFIXES)


class AuthAndCount:
    """Bearer-token check and request counting, as plain ASGI (Starlette's `@app.middleware`
    runs each request through extra tasks and memory streams: a measurable share of a recall's
    CPU on two cores)."""

    def __init__(self, app: ASGIApp, expected: bytes | None, metrics: Metrics) -> None:
        self.app, self.expected, self.metrics = app, expected, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        state = scope.setdefault("state", {})
        state["authenticated"] = True
        if self.expected is not None and not is_public(path):
            given = dict(scope.get("headers", [])).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                if path in ("/health", "/memory/health"):
                    # Liveness probes (the supervisor, compose healthchecks) carry no token:
                    # they get the status and its HTTP code, never the details.
                    state["authenticated"] = False
                else:
                    self.metrics.requests.labels(_endpoint(path), "401").inc()
                    await JSONResponse({"detail": "missing or wrong bearer token"}, 401,
                                       headers={"WWW-Authenticate": "Bearer"})(
                        scope, receive, send)
                    return
        if not path.startswith("/memory/"):
            await self.app(scope, receive, send)
            return

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.requests.labels(_endpoint(path), str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, counted)


_ENDPOINTS = frozenset({"ingest", "store", "recall", "timeline", "health", "stats", "compact",
                        "rebuild", "file", "flush", "warm", "forget", "source", "ledger",
                        "supersede", "session/end", "patterns/refresh", "export", "alerts"})


def _endpoint(path: str) -> str:
    """Metric label of a path (bounded: unknown paths share one label)."""
    name = path.removeprefix("/memory/")
    return f"/memory/{name}" if name in _ENDPOINTS else "/memory/other"


def create_app(settings: Settings, *, publisher: Publisher | None = None,
               store: Store | None = None, embedder: Embedder | None = None,
               index: VectorIndex | None = None, embed_client: Embedder | None = None,
               vector_client: VectorIndex | None = None,
               alert_rows: AlertRows | None = None) -> FastAPI:
    """The recall API. Any port left out is connected for real in the lifespan (NATS, Postgres);
    `embed_client` / `vector_client` are aliases of `embedder` / `index`. Alerts are read from
    `alert_rows`, else from the Postgres the lifespan connects (none when every port is given)."""
    if not settings.loopback and not settings.api_token:
        raise ValueError(f"refusing to listen on {settings.http_host} without TR_RECALL_API_TOKEN")
    embedder = embedder or embed_client
    index = index or vector_client
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with running(settings, metrics, publisher=publisher, store=store,
                           embedder=embedder, index=index, alert_rows=alert_rows) as container:
            app.state.container = container
            yield

    app = FastAPI(title="Total Recall recall API", version="0.1.0", lifespan=lifespan,
                  description="Memory for agents: ingest events, recall them into prompts.")

    expected = f"Bearer {settings.api_token}".encode() if settings.api_token else None

    # JSON may escape half of a surrogate pair (`"\\udaec"`): it parses, but is no text any
    # store can hold. Fields typed `str` refuse it at validation; free-form parts (a message's
    # content) meet it when the memory made of them is built, or written.
    @app.exception_handler(UnicodeEncodeError)
    async def not_unicode(_: Request, exc: UnicodeEncodeError) -> JSONResponse:
        return JSONResponse({"detail": "the request holds text that is not valid Unicode (an "
                                       f"unpaired surrogate at position {exc.start}): not "
                                       "stored"}, 422)

    @app.exception_handler(PydanticValidationError)
    async def not_unicode_text(request: Request, exc: PydanticValidationError) -> JSONResponse:
        if exc.errors() and all(e.get("type") == "string_unicode" for e in exc.errors()):
            return JSONResponse({"detail": "the request holds text that is not valid Unicode "
                                           "(an unpaired surrogate): not stored"}, 422)
        raise exc  # anything else is a fault of ours: a 500, logged

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")}
                  for e in exc.errors()]
        reason = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}"
                           for e in errors)
        return JSONResponse({"detail": reason, "errors": errors}, 422)

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        return await memory_health(request.app.state.container, request)

    app.include_router(router)
    app.mount("/ui", UiFiles(directory=UI_DIR, html=True), name="ui")
    app.add_middleware(AuthAndCount, expected=expected, metrics=metrics)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    return app
