"""The embedder and the indexer over NATS request-reply, and the JetStream publisher of
ingested events."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from totalrecall_schema import (
    AdminReply,
    AdminRequest,
    EmbedReply,
    EmbedRequest,
    MemoryEvent,
    Topology,
    VectorSearchReply,
    VectorSearchRequest,
)
from totalrecall_schema.partition_rpc import admin_partitions, gather, merge_admin_replies
from totalrecall_schema.publish import publish_event

from ..core.partitions import covered, merge_partition_replies
from ..ports import PublishFailed


class UpstreamError(RuntimeError):
    """The embedder or indexer answered with an error or not at all."""


class NatsEmbedder:
    def __init__(self, nc: NATS, topology: Topology, timeout: float) -> None:
        self.nc, self.topology, self.timeout = nc, topology, timeout

    async def embed_query(self, text: str, *, exclusive: bool = False
                          ) -> tuple[list[float], str | None]:
        req = EmbedRequest(texts=[text], kind="query", exclusive=exclusive)
        msg = await self.nc.request(self.topology.rpc_embed_query, req.model_dump_json().encode(),
                                    timeout=self.timeout)
        reply = EmbedReply.model_validate_json(msg.data)
        if reply.error or not reply.vectors:
            raise UpstreamError(reply.error or "embedder returned no vector")
        return reply.vectors[0], reply.model


class NatsVectorIndex:
    def __init__(self, nc: NATS, topology: Topology, timeout: float,
                 deep_timeout: float | None = None) -> None:
        self.nc, self.topology, self.timeout = nc, topology, timeout
        self.deep_timeout = max(timeout, deep_timeout or timeout)

    async def search(self, request: VectorSearchRequest) -> VectorSearchReply:
        """Hot-only searches get the short timeout; warm/cold ones the deep one. A partitioned
        index is asked once, on the same subject, and every partition's owner answers
        (`_gather`)."""
        timeout = self.timeout if set(request.tiers) <= {"hot"} else self.deep_timeout
        body = request.model_dump_json().encode()
        if self.topology.partitions > 1:
            return await self._gather(body, request.topk, timeout)
        msg = await self.nc.request(self.topology.rpc_vector_search, body, timeout=timeout)
        reply = VectorSearchReply.model_validate_json(msg.data)
        if reply.error:
            raise UpstreamError(reply.error)
        return reply

    async def _gather(self, body: bytes, topk: int, timeout: float) -> VectorSearchReply:
        """Scatter-gather (`partition_rpc.gather`), merged. What no owner answered for is in
        `missing_partitions` (recall then has keywords only for it); no answer at all, or only
        errors, is an error as before."""
        replies = await gather(self.nc, self.topology.rpc_vector_search, body, timeout,
                               self.topology.partitions, VectorSearchReply.model_validate_json,
                               covered)
        merged = merge_partition_replies(replies, self.topology.partitions, topk)
        if not merged.partitions:
            errors = [r.error for r in replies if r.error]
            if errors:
                raise UpstreamError("; ".join(dict.fromkeys(errors)))
            raise TimeoutError(f"no index partition answered in {timeout:.1f} s")
        return merged

    async def admin(self, request: AdminRequest, timeout: float) -> AdminReply:
        """A partitioned index: every owner does the verb for its partitions, and the answers
        are merged (`merge_admin_replies`); a partition no owner answered for is named in the
        answer (a forget or a compaction is then not ok: retried, it finishes)."""
        body = request.model_dump_json().encode()
        if self.topology.partitions > 1:
            replies = await gather(self.nc, self.topology.rpc_index_admin, body, timeout,
                                   self.topology.partitions, AdminReply.model_validate_json,
                                   admin_partitions)
            if not replies:
                raise TimeoutError(f"no indexer answered in {timeout:.1f} s")
            return merge_admin_replies(request.verb, replies, self.topology.partitions)
        msg = await self.nc.request(self.topology.rpc_index_admin, body, timeout=timeout)
        return AdminReply.model_validate_json(msg.data)


class JetStreamPublisher:
    def __init__(self, nc: NATS, js: JetStreamContext, topology: Topology) -> None:
        self.nc, self.js, self.topology = nc, js, topology

    async def _one(self, event: MemoryEvent) -> bool:
        ack = await publish_event(self.js, self.topology, event)
        return bool(ack.duplicate)

    async def publish(self, events: Sequence[MemoryEvent]) -> list[bool]:
        out: list[bool] = []
        try:
            for i in range(0, len(events), 128):  # bounded concurrency, every PubAck awaited
                out += await asyncio.gather(*(self._one(e) for e in events[i : i + 128]))
        # A server whose store cannot write (a full disk) sends no PubAck at all: the client
        # only sees a timeout. Either way the caller must hear "not stored", not a bare 500.
        except (TimeoutError, NatsError) as exc:
            raise PublishFailed(f"{type(exc).__name__}: {exc}"[:200]) from exc
        return out

    async def ping(self) -> bool:
        return bool(self.nc.is_connected)

    async def lag(self) -> dict[str, int | None]:
        topo = self.topology
        stages = (("embedder", topo.events_stream, [topo.embedder_durable]),
                  ("indexer", topo.embedded_stream, topo.indexer_durables))

        async def one(stream: str, durable: str) -> int | None:
            try:
                info = await self.js.consumer_info(stream, durable, timeout=1.0)
            except Exception:  # not created yet, or NATS away: unknown, not zero
                return None
            return (info.num_pending or 0) + (info.num_ack_pending or 0)

        async def pending(stream: str, durables: list[str]) -> int | None:
            found = await asyncio.gather(*(one(stream, d) for d in durables))
            # Every partition's consumer: one unknown makes the whole stage unknown.
            return None if any(n is None for n in found) else sum(n or 0 for n in found)

        found = await asyncio.gather(*(pending(stream, ds) for _, stream, ds in stages))
        return {name: n for (name, _, _), n in zip(stages, found, strict=True)}
