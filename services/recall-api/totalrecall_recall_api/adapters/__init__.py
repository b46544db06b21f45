"""Real adapters: NATS request-reply to the embedder and indexer, JetStream publish, Postgres.

- `nats_clients`: `NatsEmbedder`, `NatsVectorIndex`, `JetStreamPublisher`;
- `postgres`: `PostgresStore`, the read-only access to the indexer's `memories`;
- `records`: the rows it returns (`MemoryRecord`) and the `Memory` built from one;
- `tsquery`: query words as full-text operands.
"""

from .nats_clients import JetStreamPublisher, NatsEmbedder, NatsVectorIndex, UpstreamError
from .postgres import GENERIC_PLANS, PostgresStore
from .records import MemoryRecord, memory_of

__all__ = ["GENERIC_PLANS", "JetStreamPublisher", "MemoryRecord", "NatsEmbedder",
           "NatsVectorIndex", "PostgresStore", "UpstreamError", "memory_of"]
