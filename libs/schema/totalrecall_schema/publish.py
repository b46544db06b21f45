"""How a `MemoryEvent` is published to JetStream: the one rule every producer follows.

- The subject is the event's category under the events prefix (`Topology.events_subject`), or,
  for a remote host of a cluster, under that host's own subtree
  (`Topology.host_events_subject`): the only subjects its NATS user may publish on. Both are
  captured by the events stream. Raw events are never partitioned: the embedder publishes each
  embedded event on its partition's subject (`Topology.embedded_subject_of`).
- The header `Nats-Msg-Id` is the event's storage key (`MemoryEvent.key`: namespace and id), so
  that an event sent twice within JetStream's duplicate window (a retry, an event both delivered
  late and spooled) is stored once; the PubAck then says `duplicate`.
- The publish names the events stream it expects (`Nats-Expected-Stream`): a subject some other
  stream captured is refused rather than stored where no consumer reads it.

Producers: the watchers (`publisher.NatsPublisher`, which spools while NATS is away) and
recall-api's ingest (`adapters.nats_clients.JetStreamPublisher`).
"""

from __future__ import annotations

from typing import Any, Protocol

from .events import MemoryEvent
from .topology import Topology

#: JetStream's publish-side de-duplication header.
MSG_ID_HEADER = "Nats-Msg-Id"


class JetStreamPublish(Protocol):
    """The part of nats-py's `JetStreamContext` this needs (a fake in tests)."""

    async def publish(self, subject: str, payload: bytes = b"", timeout: float | None = None,
                      stream: str | None = None, headers: dict[str, Any] | None = None
                      ) -> Any: ...


def event_subject(topology: Topology, category: str, as_host: str | None = None) -> str:
    """The subject an event of `category` is published on (from `as_host`, a remote host, or
    locally)."""
    if as_host:
        return topology.host_events_subject(as_host, category)
    return topology.events_subject(category)


async def publish_event(js: JetStreamPublish, topology: Topology, event: MemoryEvent, *,
                        payload: bytes | None = None, as_host: str | None = None,
                        timeout: float | None = None) -> Any:
    """Publish `event` (as `payload`, its JSON, when the caller has it already) and await the
    PubAck, which is returned (`.duplicate`: JetStream already held this key). Raises what
    nats-py raises: a timeout when no PubAck came (NATS away, a server that cannot store)."""
    body = payload if payload is not None else event.model_dump_json().encode()
    kwargs: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    return await js.publish(event_subject(topology, event.category, as_host), body,
                            stream=topology.events_stream, headers={MSG_ID_HEADER: event.key},
                            **kwargs)
