"""One bootstrap: the indexer's object graph, built from its settings. Nothing is opened or
connected here (`lifecycle.py` does that when the app starts)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from faststream.nats import NatsBroker
from totalrecall_schema import DeadLetter
from totalrecall_worker import WorkerRuntime

from .adapters.markdown_log import MarkdownLog
from .adapters.pgstore import PgStore
from .adapters.zvec_tiers import ZvecTiers
from .core.indexer import EmbedFn, Indexer, IndexerConfig
from .handlers import STAGE
from .metrics import Metrics
from .settings import Settings


@dataclass
class Container:
    settings: Settings
    indexer: Indexer
    #: The admin RPC's FastStream broker.
    broker: NatsBroker
    #: Embeds for rebuilds, MEMORY.md and re-indexing (default: the embedder over `nc`).
    embed: EmbedFn | None = None
    runtime: WorkerRuntime = field(default_factory=WorkerRuntime)
    #: The nats-py connection of the consumer, the search RPC, dead letters and progress
    #: (connected at start).
    nc: Any = None

    @property
    def metrics(self) -> Metrics:
        return self.indexer.metrics

    async def publish_dlq(self, dl: DeadLetter) -> None:
        topo = self.settings.topology
        await self.nc.jetstream().publish(
            topo.dlq_subject(STAGE), dl.model_dump_json().encode(), stream=topo.dlq_stream,
            headers={"content-type": "application/json"})


def build_indexer(settings: Settings, metrics: Metrics | None = None,
                  pg: PgStore | None = None, tiers: ZvecTiers | None = None) -> Indexer:
    """The indexer over its three stores (Markdown logs, Postgres, Zvec tiers)."""
    metrics = metrics or Metrics()
    own = settings.own_partitions
    return Indexer(
        markdown=MarkdownLog(settings.memory_dir,
                             on_repair=lambda _path, _reason: metrics.markdown_repairs.inc()),
        pg=pg or PgStore(settings.pg_dsn, backend_nice=settings.pg_backend_nice,
                         partitions=own if settings.partition_count > 1 else None),
        tiers=tiers or ZvecTiers(settings.zvec_dir, default_dim=settings.dim,
                                 optimize_threads=settings.optimize_threads,
                                 stall_s=settings.zvec_stall_s,
                                 reads_per_tier=settings.zvec_reads_per_tier,
                                 mirror_max_docs=settings.linear_max_docs,
                                 build_nice=settings.build_nice,
                                 build_idle=settings.build_idle,
                                 min_free_bytes=settings.zvec_min_free_bytes),
        metrics=metrics,
        config=settings.section(IndexerConfig, own_partitions=own),
    )


def build(settings: Settings, *, indexer: Indexer | None = None,
          embed: EmbedFn | None = None) -> Container:
    """`indexer` and `embed` replace the real ones (tests)."""
    return Container(settings=settings, indexer=indexer or build_indexer(settings),
                     broker=NatsBroker(**settings.nats_broker_options(), log_level=logging.DEBUG),
                     embed=embed)
