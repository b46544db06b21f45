"""The recall API from start to stop: connect the ports not handed in (NATS, Postgres, the
local query model), build the container over them, run the background loops (the alert
monitor, the user-pattern refresh), and stop it all in order. `app.py`'s lifespan runs it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from .adapters.query_map_file import load_query_map
from .adapters.query_model import LocalQueryEmbedder
from .alerts.monitor import AlertMonitor
from .container import Container
from .metrics import Metrics
from .ports import AlertRows, Embedder, Publisher, Store, VectorIndex
from .settings import Settings

log = logging.getLogger("totalrecall.recall")


@asynccontextmanager
async def running(settings: Settings, metrics: Metrics, *, publisher: Publisher | None,
                  store: Store | None, embedder: Embedder | None, index: VectorIndex | None,
                  alert_rows: AlertRows | None) -> AsyncIterator[Container]:
    """The container while the app runs. Any port left out is connected for real (`_connect`);
    alerts are read from `alert_rows`, else from the Postgres connected here (none when every
    port is given)."""
    async with AsyncExitStack() as stack:
        ports: dict[str, Any] = {"publisher": publisher, "store": store, "embedder": embedder,
                                 "index": index}
        rows = alert_rows
        if any(v is None for v in ports.values()):
            connected = await _connect(settings, stack)
            pg_rows = connected.pop("alert_rows")
            rows = rows or pg_rows
            # the local query model stands in for the embedder connected here, never for
            # one given
            local = connected.pop("query_embedder") if embedder is None else None
            ports = {**connected, **{k: v for k, v in ports.items() if v},
                     "query_embedder": local}
        monitor = AlertMonitor(rows, settings, metrics) \
            if rows is not None and settings.alerts_enabled else None
        query_map = load_query_map(settings.query_map_path) if settings.query_map else None
        container = Container(settings=settings, metrics=metrics, alerts=monitor,
                              query_map=query_map, **ports)
        if isinstance(ports.get("query_embedder"), LocalQueryEmbedder):
            ports["query_embedder"].on_spread = metrics.spread_hook
        if monitor is not None:
            stack.push_async_callback(_cancelled, asyncio.create_task(monitor.run()))
        if settings.patterns_enable:  # the user-pattern refresh, in the background
            stop = asyncio.Event()
            learner = asyncio.create_task(container.learner.run(stop))
            stack.push_async_callback(_stop_task, stop, learner)
        yield container


async def _keep_session(conn: Any) -> None:
    """The pool's reset on release: nothing. asyncpg's default runs `RESET ALL` etc., one more
    round trip after every query; recall only reads and never changes its session's state."""


async def _stop_task(stop: asyncio.Event, task: asyncio.Task[None]) -> None:
    stop.set()
    task.cancel()  # a refresh under way is dropped: the next start learns again
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _connect(settings: Settings, stack: AsyncExitStack) -> dict[str, Any]:
    import asyncpg
    import nats
    from totalrecall_schema import ensure_streams_when_ready

    from .adapters import (
        GENERIC_PLANS,
        JetStreamPublisher,
        NatsEmbedder,
        NatsVectorIndex,
        PostgresStore,
    )
    from .adapters.alert_store import PostgresAlertRows
    from .adapters.query_model import load_query_embedder
    from .adapters.termstats import TermStats
    from .adapters.warm import warm
    from .recall.service import SYSTEM_CATEGORIES

    async def _closed_cb() -> None:
        log.warning("NATS connection closed")

    nc = await nats.connect(**settings.nats_connect, max_reconnect_attempts=-1,
                            reconnect_time_wait=1,
                            closed_cb=_closed_cb, name="recall-api")
    stack.push_async_callback(nc.drain)
    js = nc.jetstream()
    await ensure_streams_when_ready(js, settings.topology)
    # Custom plans: asyncpg prepares every statement, and after five runs Postgres may switch
    # to a generic plan that cannot see the query's tsquery or which filters are NULL, so the
    # keyword search bitmap-scans every match instead of walking the newest ones.
    async def open_pool(server_settings: dict[str, str] | None, generic: bool) -> asyncpg.Pool:
        # Every connection is warmed up as it opens (`adapters/warm.py`).
        init = functools.partial(warm, generic=generic, categories=SYSTEM_CATEGORIES,
                                 prefix_min_chars=settings.bm25_prefix_min_chars,
                                 timeout=settings.pg_timeout_s)
        pool = await asyncpg.create_pool(settings.pg_dsn, min_size=settings.pg_pool_min,
                                         max_size=settings.pg_pool_max, init=init,
                                         server_settings=server_settings, reset=_keep_session)
        stack.push_async_callback(pool.close)
        return pool

    pool = await open_pool({"plan_cache_mode": settings.pg_plan_cache_mode}
                           if settings.pg_plan_cache_mode else None, generic=False)
    # The lookups whose plans do not depend on their values are planned once per connection
    # (`PostgresStore.generic_pool`).
    generic_pool = await open_pool(GENERIC_PLANS, generic=True)
    term_stats = TermStats(pool, max_age_s=settings.term_stats_max_age_s,
                           prefix_min_chars=settings.bm25_prefix_min_chars)
    topo = settings.topology
    rpc = NatsEmbedder(nc, topo, settings.embed_timeout_s)
    local = await asyncio.to_thread(
        load_query_embedder, settings.query_model_path, rpc, prefix=settings.query_prefix,
        max_tokens=settings.query_max_tokens, threads=settings.query_model_threads,
        parallel_threads=settings.query_parallel_threads,
        contexts=settings.query_model_contexts) if settings.query_model else None
    if local is not None:
        stack.callback(local.close)
        sys.setswitchinterval(min(sys.getswitchinterval(), settings.gil_switch_interval_s))
    return {
        "publisher": JetStreamPublisher(nc, js, topo),
        "store": PostgresStore(pool, term_stats, generic_pool=generic_pool,
                               scan_cap=settings.bm25_scan_cap,
                               timeout=settings.pg_timeout_s,
                               prefix_min_chars=settings.bm25_prefix_min_chars,
                               max_terms=settings.bm25_max_terms,
                               max_df_ratio=settings.bm25_max_df_ratio),
        "embedder": rpc,
        "query_embedder": local,
        "index": NatsVectorIndex(nc, topo, settings.search_timeout_s,
                                 settings.deep_search_timeout_s),
        "alert_rows": PostgresAlertRows(pool, timeout=settings.pg_timeout_s * 5),
    }


async def _cancelled(task: asyncio.Task[Any]) -> None:
    """Stop a background task of the lifespan (and wait for it)."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
