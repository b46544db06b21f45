"""The embedder app: a FastStream NATS worker with /metrics and /health.

`create_app` builds the object graph (`container.build`), registers the batch RPC and the HTTP
routes, and hands the start/stop hooks to `lifecycle.Lifecycle`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from faststream.asgi import AsgiFastStream, AsgiResponse, get
from faststream.params import NoCast
from prometheus_client import make_asgi_app
from totalrecall_schema import EmbedReply
from totalrecall_worker import json_response, raw_body, start_or_exit

from .container import build
from .core.backend import EmbedBackend
from .core.engine import LocalFactory, RemoteFactory
from .handlers import handle_batch_rpc
from .lifecycle import Lifecycle
from .metrics import Metrics
from .settings import Settings


def create_app(settings: Settings, *, embedder_backend: EmbedBackend | None = None,
               query_backend: EmbedBackend | None = None,
               local_factory: LocalFactory | None = None,
               remote_factory: RemoteFactory | None = None,
               gpu_probe: Callable[[], bool] | None = None,
               metrics: Metrics | None = None,
               on_start_failure: Callable[[int], None] | None = None) -> AsgiFastStream:
    """The test doubles are those of `container.build`. Nothing is loaded, opened or connected
    here. `on_start_failure`: what ends the process when its start fails after HTTP is up
    (`__main__` passes `exit_process`; None in a test's process: logged and raised)."""
    c = build(settings, embedder_backend=embedder_backend, query_backend=query_backend,
              local_factory=local_factory, remote_factory=remote_factory, gpu_probe=gpu_probe,
              metrics=metrics)
    life = Lifecycle(c)

    @c.broker.subscriber(settings.topology.rpc_embed_batch, decoder=raw_body)
    async def on_batch(body: NoCast[Any]) -> EmbedReply:
        return await handle_batch_rpc(body, c.engine, c.metrics)

    @get
    async def health(scope: Any) -> AsgiResponse:
        return json_response(*life.health())

    app = AsgiFastStream(
        c.broker,
        asgi_routes=[("/metrics", make_asgi_app(c.metrics.registry)), ("/health", health)],
        on_startup=[life.startup], after_startup=[start_or_exit(life.serve, service="embedder",
                                                   on_failure=on_start_failure)],
        on_shutdown=[life.shutdown], after_shutdown=[life.close],
    )
    # for tests, the bench and the CLI
    app.container = c  # type: ignore[attr-defined]
    app.engine = c.engine  # type: ignore[attr-defined]
    app.metrics = c.metrics  # type: ignore[attr-defined]
    app.query_responder = c.responder  # type: ignore[attr-defined]
    return app
