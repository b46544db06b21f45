"""Thin message handlers: decode, call the core, publish dead letters, ack / nak."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from pydantic import ValidationError
from totalrecall_schema import (
    AdminReply,
    AdminRequest,
    DeadLetter,
    EmbeddedEvent,
    VectorSearchReply,
    VectorSearchRequest,
)
from totalrecall_worker import dead_letter_then_ack

from .core.indexer import EmbedFn, Indexer, StoreUnavailable

log = logging.getLogger("totalrecall.indexer")

STAGE = "indexer"


class RawMsg(Protocol):
    subject: str
    data: bytes

    async def ack(self) -> None: ...
    async def nak(self, delay: float | None = None) -> None: ...


PublishDLQ = Callable[[DeadLetter], Awaitable[None]]


def _dead_letter(msg: RawMsg, reason: str) -> DeadLetter:
    return DeadLetter(stage=STAGE, reason=reason[:2000], subject=msg.subject,
                      payload=msg.data.decode("utf-8", errors="replace"))


async def _dlq_then_ack(msg: RawMsg, reason: str, publish_dlq: PublishDLQ, indexer: Indexer,
                        retry_delay: float) -> None:
    async def park() -> None:
        await publish_dlq(_dead_letter(msg, reason))

    if await dead_letter_then_ack(msg, park, retry_delay):
        indexer.metrics.events.labels(outcome="dead_letter").inc()


async def handle_embedded_batch(msgs: Sequence[Any], indexer: Indexer, publish_dlq: PublishDLQ,
                                retry_delay: float) -> dict[str, int]:
    """One pulled batch: invalid payloads → DLQ + ack; valid ones are written to every store,
    then acked. A store outage naks the batch with a delay (no ack, no DLQ)."""
    indexer.metrics.batch_size.observe(len(msgs))
    good: list[tuple[Any, EmbeddedEvent]] = []
    dead = 0
    for msg in msgs:
        try:
            good.append((msg, EmbeddedEvent.model_validate_json(msg.data)))
        except (ValidationError, ValueError) as exc:
            dead += 1
            await _dlq_then_ack(msg, f"invalid EmbeddedEvent: {exc}", publish_dlq, indexer,
                                retry_delay)
    if not good:
        return {"indexed": 0, "dead": dead, "retry": 0}
    try:
        await indexer.index_batch([ev for _m, ev in good])
    except StoreUnavailable as exc:
        log.warning("store unavailable, batch of %d will be redelivered in %.1fs: %s",
                    len(good), retry_delay, exc)
        indexer.metrics.events.labels(outcome="retried").inc(len(good))
        for m, _ev in good:
            await m.nak(delay=retry_delay)
        return {"indexed": 0, "dead": dead, "retry": len(good)}
    except Exception:
        # Something in the batch breaks a store: isolate it message by message.
        log.exception("batch failed; retrying its %d events one by one", len(good))
        indexed = retry = 0
        for m, ev in good:
            try:
                await indexer.index_batch([ev])
            except StoreUnavailable:
                retry += 1
                await m.nak(delay=retry_delay)
            except Exception as exc:
                dead += 1
                await _dlq_then_ack(m, f"cannot be indexed: {type(exc).__name__}: {exc}",
                                    publish_dlq, indexer, retry_delay)
            else:
                indexed += 1
                await m.ack()
        return {"indexed": indexed, "dead": dead, "retry": retry}
    for m, _ev in good:
        await m.ack()
    return {"indexed": len(good), "dead": dead, "retry": 0}


async def handle_search(body: bytes, indexer: Indexer) -> VectorSearchReply:
    try:
        req = VectorSearchRequest.model_validate_json(body)
    except (ValidationError, ValueError) as exc:
        return VectorSearchReply(error=f"invalid VectorSearchRequest: {exc}")
    try:
        return await indexer.search(req)
    except Exception as exc:
        log.exception("vector search failed")
        return VectorSearchReply(error=f"{type(exc).__name__}: {exc}")


async def handle_admin(body: bytes, indexer: Indexer, embed: EmbedFn | None,
                       held: list[int] | None = None) -> AdminReply:
    """`held`: the partitions this indexer holds the lease of (None: the index is not
    partitioned). A standby (none held) changes nothing (each partition has one writer, its
    owner) and answers for no partition, so that the caller waits for the owners."""
    try:
        req = AdminRequest.model_validate_json(body)
    except (ValidationError, ValueError) as exc:
        return AdminReply(ok=False, error=f"invalid AdminRequest: {exc}")
    if held is not None and not held:
        return AdminReply(result={"standby": True}, partitions=[])
    reply = await indexer.admin(req, embed)
    reply.partitions = held
    return reply
