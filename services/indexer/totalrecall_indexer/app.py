"""The indexer app: a FastStream NATS worker with /metrics, /health and /ready.

`create_app` builds the object graph (`container.build`), registers the admin RPC and the HTTP
routes, and hands the start/stop hooks to `lifecycle.start_stop.Lifecycle`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from faststream.asgi import AsgiFastStream, AsgiResponse, get
from faststream.params import NoCast
from prometheus_client import make_asgi_app
from totalrecall_schema import AdminReply
from totalrecall_worker import json_response, raw_body, start_or_exit

from .container import build
from .core.indexer import EmbedFn, Indexer
from .lifecycle.start_stop import Lifecycle
from .settings import Settings


def create_app(settings: Settings, *, indexer: Indexer | None = None,
               embed: EmbedFn | None = None, pg_connect_timeout_s: float = 60.0,
               on_start_failure: Callable[[int], None] | None = None) -> AsgiFastStream:
    """`indexer` and `embed` replace the real ones (tests). Nothing is opened or connected
    here. `on_start_failure`: what ends the process when its start fails after HTTP is up
    (`__main__` passes `exit_process`; None in a test's process: logged and raised)."""
    c = build(settings, indexer=indexer, embed=embed)
    life = Lifecycle(c, pg_connect_timeout_s=pg_connect_timeout_s)

    # Several workers: `stats` (with the progress) is answered while a rebuild runs.
    @c.broker.subscriber(settings.topology.rpc_index_admin, decoder=raw_body, max_workers=4)
    async def on_admin(body: NoCast[Any]) -> AdminReply:
        return await life.answer_admin(body)

    @get
    async def health(scope: Any) -> AsgiResponse:
        return json_response(*await life.health())

    @get
    async def ready(scope: Any) -> AsgiResponse:
        return json_response(*life.ready())

    app = AsgiFastStream(
        c.broker,
        asgi_routes=[("/metrics", make_asgi_app(c.metrics.registry)), ("/health", health),
                     ("/ready", ready)],
        on_startup=[life.startup], after_startup=[start_or_exit(life.serve, service="indexer",
                                                   on_failure=on_start_failure)],
        on_shutdown=[life.shutdown], after_shutdown=[life.close],
    )
    app.container = c  # type: ignore[attr-defined]  # for tests, the bench and the CLI
    app.indexer = c.indexer  # type: ignore[attr-defined]
    return app
