"""What the indexer's rooms share: the three stores, the write lock, and the state every write
consults (forgotten keys, pinned MEMORY.md memories, tiers whose writes are held).

The rooms (`gate`, `ingest`, `searcher`, `maintenance`, `reindex`, `rebuild`, `memory_md_sync`,
`forget`, `admin`) each hold the one `IndexState`; the `Indexer` facade builds it and them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent
from totalrecall_schema.partitions import partition_of
from totalrecall_schema.tiers import HOT_MAX_AGE_S, WARM_MAX_AGE_S

from ..metrics import Metrics
from .search import TIERS, tier_for_age

if TYPE_CHECKING:
    from ..adapters.markdown_log import MarkdownLog
    from ..adapters.pgstore import PgStore
    from ..adapters.zvec_tiers import ZvecTiers


class StoreUnavailable(Exception):
    """A store that should come back (Postgres down, disk full): retry the batch later."""


@dataclass
class IndexerConfig:
    hot_max_age_s: float = HOT_MAX_AGE_S
    warm_max_age_s: float = WARM_MAX_AGE_S
    #: Retention: memories older than this are forgotten everywhere (None: kept forever).
    cold_max_age_s: float | None = None
    search_ef: int = 128
    #: Tiers this small are searched exactly (a scan costs little, and a filter that keeps a
    #: fifth of a quantized tier is where HNSW loses most recall).
    linear_max_docs: int = 20_000
    optimize_min_new_docs: int = 2000
    optimize_max_delay_s: float = 900.0
    embed_batch: int = 64
    memory_md_namespace: str = "default"
    #: While MEMORY.md memories lack vectors (embedder down), try again this often.
    memory_md_retry_s: float = 60.0
    #: The installation's index partitions (`totalrecall_schema.partitions`) and this
    #: indexer's own (None: all of them).
    partition_count: int = 1
    own_partitions: tuple[int, ...] | None = None


def now_ms() -> int:
    return int(time.time() * 1000)


class IndexState:
    def __init__(self, markdown: MarkdownLog, pg: PgStore, tiers: ZvecTiers, metrics: Metrics,
                 cfg: IndexerConfig) -> None:
        self.markdown = markdown
        self.pg = pg
        self.tiers = tiers
        self.metrics = metrics
        self.cfg = cfg
        #: Serialises every change to the stores (ingest, compaction, forget, rebuild).
        self.write_lock = asyncio.Lock()
        #: Keys of forgotten memories (the `forgotten` table, loaded by `load_tombstones`):
        #: no write brings them back (a redelivered or replayed event, a backfill, MEMORY.md).
        self.forgotten: set[str] = set()
        # MEMORY.md: its memories stay in the hot tier (compaction skips these event ids).
        self.pinned_ids: set[str] = set()
        #: HNSW build policy: documents written since a tier's last build, and when that was.
        self.new_since_optimize: dict[str, int] = dict.fromkeys(TIERS, 0)
        self.last_optimize: dict[str, float] = dict.fromkeys(TIERS, time.monotonic())
        # Tiers being refilled after they could not be opened (see `TierReindex`).
        self.reindex_state: dict[str, dict[str, Any]] = {}
        self.generation = 0  # bumped whenever the collections are re-created
        #: Set when a tier's writes are held: the app's repair loop then runs
        #: `finish_held_builds` (an interrupted HNSW build must complete before writes).
        self.builds_wanted = asyncio.Event()
        #: Set when `tiers.reindex` may have gained a tier: the app's loop runs `reindex_tiers`.
        self.reindex_wanted = asyncio.Event()

    def part_of(self, event: MemoryEvent) -> int | None:
        """The partition a memory is kept under in Postgres (None: the index is not
        partitioned). A memory this indexer writes of its own accord (MEMORY.md) whose
        partition it does not own stays in its first: what it writes, it answers for."""
        cfg = self.cfg
        if cfg.partition_count <= 1:
            return None
        part = partition_of(event.namespace, event.metadata.hostname, cfg.partition_count)
        own = cfg.own_partitions
        return part if own is None or part in own else own[0]

    def tier_for(self, ts_ms: int, now: int) -> str:
        return tier_for_age(ts_ms, now, self.cfg.hot_max_age_s, self.cfg.warm_max_age_s)

    def check_writable(self, tiers: Iterable[str]) -> None:
        """Raise StoreUnavailable (retry later) when one of `tiers` takes no writes yet."""
        held = {t: self.tiers.held[t] for t in tiers if t in self.tiers.held}
        if held:
            self.builds_wanted.set()
            raise StoreUnavailable("; ".join(f"zvec tier {t} takes no writes yet: {why}"
                                             for t, why in held.items()))

    async def refresh_metrics(self) -> None:
        self.metrics.set_tier_stats(await asyncio.to_thread(self.tiers.stats))
        with contextlib.suppress(Exception):
            self.metrics.pg_rows.set(await self.pg.count())
