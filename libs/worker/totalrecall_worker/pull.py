"""A JetStream pull consumer: durable, explicit acks, adaptive batches, one task.

This is a plain nats-py pull loop rather than FastStream's `PullSub(batch=True)`: FastStream
0.7.8 catches only `nats.errors.TimeoutError` while topping up a batch, but nats-py raises a bare
`asyncio.TimeoutError` when the batch deadline runs out mid-fetch; the exception escapes, the
already-fetched partial batch is dropped and those messages wait `ack_wait` for redelivery (seen
in bench/embedder_bench.py: a 60 s stall). Here every timeout of a fetch means "nothing (more)
came" and nothing fetched is ever dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from .stopping import stop_task

log = logging.getLogger("totalrecall.worker")

#: Handles one pulled batch; it acks / naks the messages itself.
BatchHandler = Callable[[list[Any]], Awaitable[object]]
#: The connection to pull on (set once the service connected): a `nats.aio.client.Client`.
Connection = Callable[[], Any]

#: How long stop() lets the batch in hand finish, besides one fetch's wait (s).
DRAIN_S = 30.0


@dataclass(frozen=True)
class PullSpec:
    """The durable consumer and how it is read."""

    stream: str
    #: Filter subject, e.g. `memory.events.>`.
    subject: str
    durable: str
    #: Seconds before the server redelivers a message nobody acked.
    ack_wait_s: float
    max_ack_pending: int
    #: Deliveries before the server gives up on a message (None: the server's default, unlimited).
    max_deliver: int | None = None
    #: Messages per batch; a callable is asked before every fetch (the embedder's grows on a GPU).
    batch_max: int | Callable[[], int] = 64
    #: Longest wait of one (idle) fetch; it returns as soon as messages are there (s).
    fetch_timeout_s: float = 1.0
    #: When a fetch brought more than one message but less than a full batch, wait up to this
    #: long for the rest (s; 0: handle what came at once). An idle pipeline thus handles a lone
    #: message immediately.
    batch_deadline_s: float = 0.0
    #: When the handler raises: nak what it left unsettled with this delay (s); None leaves those
    #: messages to `ack_wait_s`.
    nak_delay_on_error_s: float | None = None
    #: Further filter subjects beside `subject` (e.g. the remote hosts' `memory.host.*.events.>`;
    #: a consumer with several filters needs nats-server 2.10).
    more_subjects: tuple[str, ...] = ()

    @property
    def filters(self) -> list[str]:
        return [self.subject, *self.more_subjects]

    def consumer_config(self) -> ConsumerConfig:
        many = len(self.filters) > 1
        return ConsumerConfig(
            durable_name=self.durable, ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL, ack_wait=self.ack_wait_s,
            max_deliver=self.max_deliver, max_ack_pending=self.max_ack_pending,
            filter_subject=None if many else self.subject,
            filter_subjects=self.filters if many else None)


class PullConsumer:
    """Pulls batches from a durable JetStream consumer and hands them to `handle`.

    `start()` creates the consumer (retrying while NATS cannot), then reads it on a task of its
    own until `stop()`, which lets the batch in hand finish (bounded) and unsubscribes.
    """

    def __init__(self, connection: Connection, spec: PullSpec, handle: BatchHandler) -> None:
        self.connection, self.spec, self.handle = connection, spec, handle
        self._running = False
        self._sub: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        """Reading: started and its task has not ended."""
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        self._running = True
        self._sub = await self._subscribe()
        self._task = asyncio.create_task(self._run(self._sub), name=f"pull {self.spec.durable}")

    def stop_fetching(self) -> None:
        """No new fetch after the batch in hand (stop() then waits for that batch)."""
        self._running = False

    async def stop(self) -> None:
        self.stop_fetching()
        task, self._task = self._task, None
        if task is not None:  # let the current batch finish (bounded), then stop
            await stop_task(task, grace_s=self.spec.fetch_timeout_s + DRAIN_S)
        sub, self._sub = self._sub, None
        if sub is not None:
            # Nothing reads a pull subscription's queue outside fetch(): without this a
            # connection drain waits on it for its full timeout (30 s).
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _subscribe(self) -> Any:
        spec = self.spec
        while True:
            try:
                await self._refilter()
                return await self.connection().jetstream().pull_subscribe(
                    spec.subject, durable=spec.durable, stream=spec.stream,
                    config=spec.consumer_config())
            except Exception as exc:  # e.g. NATS restarting: try again
                log.warning("cannot subscribe to %s yet: %s", spec.stream, exc)
                await asyncio.sleep(1.0)

    async def _refilter(self) -> None:
        """A durable made before its filter grew (the embedder's, before the remote hosts'
        subjects) takes the spec's filter: nats-py's pull_subscribe leaves an existing consumer
        as it is. Its position and pending acks stay (a filter is editable in place)."""
        from nats.js.errors import NotFoundError

        spec = self.spec
        js = self.connection().jetstream()
        try:
            info = await js.consumer_info(spec.stream, spec.durable)
        except NotFoundError:
            return  # pull_subscribe creates it
        cfg = info.config
        have = cfg.filter_subjects or ([cfg.filter_subject] if cfg.filter_subject else [])
        if sorted(have) == sorted(spec.filters):
            return
        want = spec.consumer_config()
        log.info("consumer %s: filter %s -> %s", spec.durable, have, spec.filters)
        await js.add_consumer(spec.stream, replace(
            cfg, filter_subject=want.filter_subject, filter_subjects=want.filter_subjects))

    async def _run(self, sub: Any) -> None:
        while self._running:
            msgs = await self.fetch(sub)
            if not msgs:
                continue
            try:
                await self.handle(msgs)
            except Exception:  # never let the loop die; unsettled messages come back
                log.exception("batch of %d message(s) failed", len(msgs))
                await self._nak_unsettled(msgs)

    async def fetch(self, sub: Any) -> list[Any]:
        """One adaptive batch: what is pending now, topped up within `batch_deadline_s` when the
        pipeline is busy; [] after an idle wait or connection trouble."""
        spec = self.spec
        batch_max = spec.batch_max() if callable(spec.batch_max) else spec.batch_max
        try:
            msgs = list(await sub.fetch(batch_max, timeout=spec.fetch_timeout_s))
        except TimeoutError:  # also nats.errors.TimeoutError (a subclass)
            return []
        except Exception as exc:  # connection trouble: nats-py reconnects by itself
            log.warning("fetch failed: %s", exc)
            await asyncio.sleep(1.0)
            return []
        if 1 < len(msgs) < batch_max and spec.batch_deadline_s > 0:
            with contextlib.suppress(Exception):  # TimeoutError: nothing more came
                msgs += await sub.fetch(batch_max - len(msgs), timeout=spec.batch_deadline_s)
        return msgs

    async def _nak_unsettled(self, msgs: list[Any]) -> None:
        delay = self.spec.nak_delay_on_error_s
        if delay is None:
            return
        for m in msgs:
            if not getattr(m, "_ackd", False):  # nats-py's "already acked / nak'ed" flag
                with contextlib.suppress(Exception):
                    await m.nak(delay=delay)
