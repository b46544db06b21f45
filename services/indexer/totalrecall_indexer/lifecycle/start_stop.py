"""The indexer from start to stop: open the stores, consume embedded events, answer vector
searches, run the maintenance loops, report health, shut down in order."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import time
from typing import Any

import nats
from totalrecall_schema import AdminReply, ensure_streams_when_ready
from totalrecall_schema.host import local_host
from totalrecall_worker import (
    ConcurrentResponder,
    PullConsumer,
    PullSpec,
    confirm_subscriptions,
    exit_process,
)

from ..adapters.nats_clients import nats_embed_fn, nats_in_flight_fn
from ..adapters.partition_lease import LeaseLost, PartitionLeases
from ..container import Container
from ..handlers import handle_admin, handle_embedded_batch, handle_search
from . import loops

log = logging.getLogger("totalrecall.indexer")

#: Vector searches answered at once (each on its own task; see ConcurrentResponder).
SEARCH_CONCURRENCY = 4


class Lifecycle:
    def __init__(self, c: Container, *, pg_connect_timeout_s: float = 60.0) -> None:
        self.c = c
        self.pg_connect_timeout_s = pg_connect_timeout_s
        s, topo = c.settings, c.settings.topology
        # One durable consumer per partition owned: its only reader, so its only writer.
        self.consumers = [PullConsumer(
            lambda: c.nc,
            PullSpec(stream=topo.embedded_stream, subject=topo.embedded_filter(p),
                     durable=topo.indexer_durable_of(p), ack_wait_s=s.ack_wait_s,
                     max_ack_pending=20_000, batch_max=s.batch_size,
                     fetch_timeout_s=s.fetch_timeout_s),
            self.on_embedded) for p in s.own_partitions]
        #: The partitions' leases (an index of several partitions only).
        self.leases: PartitionLeases | None = None
        # Vector search is on every recall's critical path: no FastStream there.
        self.search = ConcurrentResponder(topo.rpc_vector_search, self.answer_search,
                                          concurrency=SEARCH_CONCURRENCY)

    async def startup(self) -> None:
        c, idx = self.c, self.c.indexer
        await self._open_tiers()
        for tier in idx.tiers.quarantined:  # logged by tiers; re-indexed by reindex_loop
            c.metrics.quarantined.labels(tier=tier).inc()
        repaired = await asyncio.to_thread(idx.markdown.recover)  # torn tails after a crash
        if repaired:
            log.warning("repaired torn daily logs after an unclean shutdown: %s", repaired)
        await self._start_postgres()
        await idx.load_tombstones()  # before the consumer starts: forgotten stays forgotten
        c.nc = await nats.connect(**c.settings.nats_connect,
                                  name="totalrecall-indexer-admin")
        await ensure_streams_when_ready(c.nc.jetstream(), c.settings.topology)
        if c.embed is None:
            c.embed = nats_embed_fn(c.nc, c.settings)
        idx.reconciler.in_flight = nats_in_flight_fn(c.nc, c.settings)
        if idx.on_progress is None:
            idx.on_progress = self.publish_progress

    async def _open_tiers(self, every_s: float = 2.0, log_every_s: float = 60.0) -> None:
        """Open the Zvec tiers; while the state disk is full, wait for space (a tier that
        cannot replay its log for lack of space is not broken: `adapters/disk_space.py`)."""
        tiers, logged = self.c.indexer.tiers, float("-inf")
        while True:
            try:
                await asyncio.to_thread(tiers.open)
                return
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if time.monotonic() - logged >= log_every_s:
                    log.error("%s: the zvec tiers are opened once space is back (retried "
                              "every %.0f s)", exc, every_s)
                    logged = time.monotonic()
                await asyncio.sleep(every_s)

    async def _start_postgres(self) -> None:
        deadline = time.monotonic() + self.pg_connect_timeout_s
        while True:
            try:
                await self.c.indexer.pg.start()
                return
            except Exception as exc:  # Postgres not up yet: retry until the deadline
                if time.monotonic() > deadline:
                    raise
                log.warning("postgres not reachable yet (%s); retrying", exc)
                await asyncio.sleep(1.0)

    async def serve(self) -> None:
        """After the broker started the admin RPC: search, the consumer, the loops."""
        c, s, runtime = self.c, self.c.settings, self.c.runtime
        await self.search.start(c.nc)
        await confirm_subscriptions(c.broker.connection, c.nc)
        await c.indexer.refresh_metrics()
        # Zvec against Postgres before anything is written (then periodically): whatever left
        # a tier short is re-indexed, and the service is not ready until it is.
        await loops.reconcile_once(c)
        runtime.start()
        if s.partition_count > 1:  # a partition's consumer is read by its lease holder only
            self.leases = PartitionLeases(
                c.nc.jetstream(), s.topology, s.own_partitions,
                owner=f"{local_host().hostname}:{s.home}", lease_s=s.partition_lease_s)
            runtime.spawn(self._lease_then_consume(), name="partition leases")
        else:
            for consumer in self.consumers:
                await runtime.consume(consumer)
        # Always on (not a background nicety): a tier whose last HNSW build was interrupted
        # takes no writes until a build completed; ingest is redelivered meanwhile.
        runtime.spawn(loops.held_builds_loop(c), name="held builds")
        if s.background_tasks:
            runtime.spawn(loops.compact_loop(c), name="compaction")
            runtime.spawn(loops.optimize_loop(c), name="optimize")
            if s.vacuum_min_new_rows > 0:
                runtime.spawn(loops.vacuum_loop(c), name="vacuum")
        if s.memory_md_poll_s > 0:
            runtime.spawn(loops.memory_md_loop(c), name="MEMORY.md sync")
        if s.metrics_interval_s > 0:
            runtime.every(s.metrics_interval_s, lambda: loops.refresh_gauges(c),
                          what="metrics refresh")
        # A tier that could not be opened (refilled), or whose build was interrupted (checked):
        # re-indexed from Postgres, whenever `tiers.reindex` lists one.
        runtime.spawn(loops.reindex_loop(c), name="re-index")
        runtime.spawn(loops.reconcile_loop(c), name="consistency check")
        runtime.ready = True

    async def _lease_then_consume(self) -> None:
        assert self.leases is not None
        leases, runtime = self.leases, self.c.runtime
        try:
            await leases.acquire()
        except LeaseLost as exc:
            log.critical("%s while taking the others: exiting", exc)
            exit_process()
        runtime.every(leases.lease_s / 3, leases.renew_or_exit, what="partition lease renewal")
        for consumer in self.consumers:
            await runtime.consume(consumer)

    async def shutdown(self) -> None:
        self.c.runtime.halt()
        await self.search.stop()
        await self.c.runtime.stop()
        if self.leases is not None:  # after the consumers: the next owner need not wait
            with contextlib.suppress(Exception):
                await self.leases.release()

    async def close(self) -> None:
        """After the broker closed: the connection and the stores, under the write lock."""
        c, idx = self.c, self.c.indexer
        async with idx.write_lock:
            if c.nc is not None:
                with contextlib.suppress(Exception):
                    await c.nc.close()
            await idx.pg.close()
            await idx.close_stores()
            # Waits for an append still running in a thread (the log's own lock), then records
            # that the daily logs need no tail check at the next start.
            await asyncio.to_thread(idx.markdown.mark_clean)

    async def on_embedded(self, msgs: list[Any]) -> None:
        await handle_embedded_batch(msgs, self.c.indexer, self.c.publish_dlq,
                                    self.c.settings.retry_delay_s)

    def held_partitions(self) -> list[int] | None:
        """The partitions this indexer answers for: those it holds the lease of (a standby:
        none); None when the index is not partitioned."""
        s = self.c.settings
        if s.partition_count <= 1:
            return None
        return sorted(self.leases.held) if self.leases is not None else list(s.own_partitions)

    async def answer_search(self, body: bytes) -> bytes:
        reply = await handle_search(body, self.c.indexer)
        # recall hears every partition's owner and merges
        reply.partitions = self.held_partitions()
        return reply.model_dump_json().encode()

    async def answer_admin(self, body: bytes) -> AdminReply:
        return await handle_admin(body, self.c.indexer, self.c.embed, self.held_partitions())

    async def publish_progress(self, progress: dict[str, Any]) -> None:
        nc = self.c.nc
        if nc is not None and nc.is_connected:
            await nc.publish(self.c.settings.topology.rpc_index_progress,
                             json.dumps(progress, default=str).encode())

    async def health(self) -> tuple[dict[str, Any], int]:
        c, idx = self.c, self.c.indexer
        if not c.runtime.ready:
            return {"status": "starting"}, 503
        pg_ok = await idx.pg.ping()
        nats_ok = bool(c.nc is not None and c.nc.is_connected)
        try:
            tiers = await asyncio.to_thread(idx.tiers.stats)
        except Exception as exc:
            return {"status": "error", "zvec": str(exc)}, 503
        reindex = {t: {"reason": why, **idx.reindex_state.get(t, {})}
                   for t, why in idx.tiers.reindex.items()}
        held = dict(idx.tiers.held)
        disk_low = idx.tiers.space.low()
        status = "ok" if pg_ok and nats_ok and not reindex and not held and not disk_low \
            else "degraded"
        body: dict[str, Any] = {"status": status, "postgres": pg_ok, "nats": nats_ok,
                                "partitions": list(c.settings.own_partitions),
                                "model": idx.tiers.model, "dim": idx.tiers.dim,
                                "docs": {t: int(s["doc_count"]) for t, s in tiers.items()},
                                "consistency": idx.reconciler.last}
        if reindex:
            body["reindex"] = reindex
        if held:
            body["writes_held"] = held
        if disk_low:
            body["disk_full"] = (f"under {idx.tiers.space.min_free / 2**20:.0f} MiB free: "
                                 "zvec writes wait for space")
        return body, 200

    def ready(self) -> tuple[dict[str, Any], int]:
        """Ready: started, and every tier whole (no write hold, no re-index, the first
        consistency check done). Drained pipelines and health checks that must not count a
        half-filled tier ask this, not `/health`."""
        if not self.c.runtime.ready:
            return {"ready": False, "waiting_for": {"start": "starting"}}, 503
        waiting = dict(self.c.indexer.not_ready)
        leases = self.leases
        if leases is not None and len(leases.held) < len(leases.partitions):
            waiting["partitions"] = (f"waiting for the lease of partitions held by another "
                                     f"indexer: {leases.waiting or 'not taken yet'}")
        if waiting:
            return {"ready": False, "waiting_for": waiting}, 503
        return {"ready": True}, 200
