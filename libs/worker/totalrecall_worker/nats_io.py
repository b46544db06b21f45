"""Small NATS steps every worker takes the same way."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

log = logging.getLogger("totalrecall.worker")


class AckableMsg(Protocol):
    async def ack(self) -> None: ...
    async def nak(self, delay: float | None = None) -> None: ...


async def confirm_subscriptions(*connections: Any, timeout: float = 10.0) -> None:
    """Wait until the server has processed our SUBs (a flush round-trip on each connection):
    a request racing a service's start would otherwise get "no responders"."""
    for conn in connections:
        try:
            await conn.flush(timeout=timeout)
        except Exception as exc:  # requests may see "no responders" for a moment
            log.warning("could not confirm the RPC subscriptions with the server: %r", exc)


async def dead_letter_then_ack(msg: AckableMsg, publish: Callable[[], Awaitable[object]],
                               retry_delay_s: float) -> bool:
    """Park `msg` in the dead-letter queue: `publish` its dead letter, and ack `msg` only once
    JetStream stored it. When the publish fails `msg` is nak'ed with `retry_delay_s` (redelivered,
    never lost). True when it was parked."""
    try:
        await publish()
    except Exception as exc:  # cannot park it: leave it to redelivery
        log.warning("dead-letter publish failed (%s); message will be redelivered", exc)
        await msg.nak(delay=retry_delay_s)
        return False
    await msg.ack()
    return True


async def consumer_backlog(nc: Any, stream: str, durable: str, timeout: float = 5.0) -> int:
    """Messages the durable consumer has not settled yet: pending + delivered but unacked
    (the queue-depth gauge). Raises when the consumer does not exist or NATS is unreachable."""
    info = await nc.jetstream().consumer_info(stream, durable, timeout=timeout)
    return (info.num_pending or 0) + (info.num_ack_pending or 0)
