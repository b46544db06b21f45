"""Stream and subject names: defined here and nowhere else.

A `Topology` carries a prefix so that tests (and several installations on one NATS server) get
their own streams and subjects: `Topology()` is production (`memory.*`, `MEMORY_*`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

#: How long JetStream remembers a Nats-Msg-Id for publish-side dedup.
DUPLICATE_WINDOW_S = 600.0
EVENTS_MAX_AGE_S = 14 * 24 * 3600


@dataclass(frozen=True)
class Topology:
    prefix: str = "memory"
    stream_prefix: str = "MEMORY"

    @classmethod
    def for_test(cls, tag: str) -> Topology:
        tag = "".join(c for c in tag if c.isalnum()).lower()
        return cls(prefix=f"t{tag}", stream_prefix=f"T{tag.upper()}")

    # --- streams -------------------------------------------------------------------------
    @property
    def events_stream(self) -> str:
        return f"{self.stream_prefix}_EVENTS"

    @property
    def embedded_stream(self) -> str:
        return f"{self.stream_prefix}_EMBEDDED"

    @property
    def dlq_stream(self) -> str:
        return f"{self.stream_prefix}_DLQ"

    # --- subjects ------------------------------------------------------------------------
    def events_subject(self, category: str) -> str:
        return f"{self.prefix}.events.{category}"

    def embedded_subject(self, category: str) -> str:
        return f"{self.prefix}.embedded.{category}"

    def dlq_subject(self, stage: str) -> str:
        return f"{self.prefix}.dlq.{stage}"

    @property
    def events_all(self) -> str:
        return f"{self.prefix}.events.>"

    @property
    def embedded_all(self) -> str:
        return f"{self.prefix}.embedded.>"

    @property
    def dlq_all(self) -> str:
        return f"{self.prefix}.dlq.>"

    # --- request-reply -------------------------------------------------------------------
    @property
    def rpc_embed_query(self) -> str:
        """Embed one query text (recall path, never queued behind ingest)."""
        return f"{self.prefix}.rpc.embed.query"

    @property
    def rpc_embed_batch(self) -> str:
        """Embed many documents (rebuilds, backfills)."""
        return f"{self.prefix}.rpc.embed.batch"

    @property
    def rpc_vector_search(self) -> str:
        return f"{self.prefix}.rpc.index.search"

    @property
    def rpc_index_admin(self) -> str:
        """Indexer admin verbs: stats, compact, rebuild, forget (see `rpc.AdminRequest`)."""
        return f"{self.prefix}.rpc.index.admin"

    @property
    def rpc_index_progress(self) -> str:
        """Progress of long indexer jobs (rebuild), published by the indexer (plain NATS, JSON
        `{"job", "phase", "done", "total", "elapsed_s", "finished", ...}`); `totalrecall rebuild`
        listens."""
        return f"{self.prefix}.rpc.index.progress"

    # --- durable consumer names ----------------------------------------------------------
    embedder_durable: str = "embedder"
    indexer_durable: str = "indexer"

    def stream_configs(self) -> list[StreamConfig]:
        common = dict(
            storage=StorageType.FILE,
            retention=RetentionPolicy.LIMITS,
            discard=DiscardPolicy.OLD,
            duplicate_window=DUPLICATE_WINDOW_S,
        )
        return [
            StreamConfig(name=self.events_stream, subjects=[self.events_all],
                         max_age=EVENTS_MAX_AGE_S, **common),  # type: ignore[arg-type]
            StreamConfig(name=self.embedded_stream, subjects=[self.embedded_all],
                         max_age=EVENTS_MAX_AGE_S, **common),  # type: ignore[arg-type]
            StreamConfig(name=self.dlq_stream, subjects=[self.dlq_all],
                         max_age=90 * 24 * 3600, **common),  # type: ignore[arg-type]
        ]


async def ensure_streams(js: object, topology: Topology) -> None:
    """Create or update every stream of `topology` (idempotent; safe from every service)."""
    from nats.js.errors import BadRequestError, NotFoundError

    for cfg in topology.stream_configs():
        try:
            await js.stream_info(cfg.name)  # type: ignore[attr-defined]
        except NotFoundError:
            # BadRequest: created concurrently by another service.
            with contextlib.suppress(BadRequestError):
                await js.add_stream(cfg)  # type: ignore[attr-defined]
        else:
            await js.update_stream(cfg)  # type: ignore[attr-defined]
