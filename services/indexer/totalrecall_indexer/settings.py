"""Indexer settings (environment prefix TR_INDEXER_; the shared ones in `ServiceSettings`).

The state directory `home` holds the Zvec tiers under `zvec/` and the Markdown logs under
`memory/`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict
from totalrecall_schema.partitions import parse_partitions
from totalrecall_schema.service_settings import ServiceSettings
from totalrecall_schema.tiers import HOT_MAX_AGE_S, WARM_MAX_AGE_S


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TR_INDEXER_", extra="ignore")

    http_port: int = 8767
    pg_dsn: str = "postgresql://postgres@127.0.0.1:5433/totalrecall"

    #: Vector dimension used until the first embedded event says otherwise.
    dim: int = 384

    # consumer
    batch_size: int = 256
    #: Longest wait of one pull request (a fetch returns as soon as messages are there).
    fetch_timeout_s: float = 1.0
    ack_wait_s: float = 120.0
    #: Delay before a batch is redelivered when Postgres (or another store) is down.
    retry_delay_s: float = 5.0

    # tiers
    #: The tier policy's ages (`totalrecall_schema.tiers`): recall-api reads the same settings.
    hot_max_age_s: float = Field(default=HOT_MAX_AGE_S, gt=0)
    warm_max_age_s: float = Field(default=WARM_MAX_AGE_S, gt=0)
    #: Retention of the cold tier: memories older than this are dropped from the indexes (Zvec,
    #: Postgres) at each compaction; the Markdown daily logs, the ground truth, keep them (unset:
    #: indexed forever). MEMORY.md memories never expire.
    cold_max_age_s: float | None = Field(default=None, gt=0)
    compact_interval_s: float = 600.0
    optimize_interval_s: float = 30.0
    #: Build the HNSW once this many docs arrived since the last build …
    optimize_min_new_docs: int = 2000
    #: … or once this long has passed with an incomplete index.
    optimize_max_delay_s: float = 900.0
    background_tasks: bool = True
    #: VACUUM the Postgres mirror after this many inserts, checked every `vacuum_interval_s`
    #: (ANALYZE too once a fifth of its rows changed); 0: leave it to autovacuum.
    vacuum_min_new_rows: int = 1000
    vacuum_interval_s: float = Field(default=5.0, gt=0)
    #: Threads zvec may use for an HNSW build (the machine has 2 cores shared by everyone).
    optimize_threads: int = 1
    #: Nice value of an HNSW build (zvec's build threads and the thread it is called on): a
    #: build is background work, and on a busy CPU the searches of recalls go first (0: the
    #: service's own priority).
    build_nice: int = Field(default=10, ge=0, le=19)
    #: Build under `SCHED_IDLE` too (Linux): a nice value only shares a busy CPU, and a core
    #: running a build at nice 10 is not idle to the queries of a recall that wake meanwhile;
    #: under `SCHED_IDLE` it is (`totalrecall_worker.priority`). On a CPU kept busy by other
    #: work the build waits, and the tier's writes with it.
    build_idle: bool = True
    #: Nice value of the Postgres backends serving the indexer (its writes, vacuum, statistics),
    #: where Postgres runs on this machine as a user the indexer may renice; 0: left alone.
    pg_backend_nice: int = Field(default=10, ge=0, le=19)
    #: A zvec query or write in flight this long means zvec hung: the indexer exits (code 70)
    #: for its supervisor to restart it (`adapters/zvec_watchdog.py`). 0: never.
    zvec_stall_s: float = Field(default=60.0, ge=0)
    #: zvec queries of one tier at once (0: any number): concurrent queries of a collection can
    #: hang zvec 0.8 (`adapters/build_exclusion.py`).
    zvec_reads_per_tier: int = Field(default=1, ge=0)
    #: No Zvec write, HNSW build or quarantine while the state disk has less than this free:
    #: zvec dies of SIGBUS writing to a full disk, and cannot replay its log to open a tier
    #: (`adapters/disk_space.py`). The batch is redelivered once space is back. 0: no margin.
    zvec_min_free_bytes: int = Field(default=64 * 2**20, ge=0)
    #: How often Zvec is checked against Postgres (counts per tier, then keys where they
    #: differ; missing memories re-indexed, duplicates removed: `core/reconcile.py`). Always
    #: once at start; 0: only then.
    reconcile_interval_s: float = Field(default=300.0, ge=0)

    # partitions
    #: The index partitions this indexer owns and alone writes (`totalrecall_schema.partitions`):
    #: `"0"`, `"0,2"`, `"0-3"`; empty or `all`: every one of `partition_count` (`TR_PARTITIONS`).
    partitions: str = ""

    #: A partition's lease (`adapters/partition_lease.py`) lapses this long after its holder stopped
    #: renewing it (a crash): another indexer configured with it may then take it over.
    partition_lease_s: float = Field(default=15.0, ge=3.0)

    @property
    def own_partitions(self) -> tuple[int, ...]:
        return parse_partitions(self.partitions, self.partition_count)

    # search
    search_ef: int = 128
    #: Tiers with at most this many memories are searched exactly rather than by HNSW.
    linear_max_docs: int = 20_000

    # rebuild
    embed_timeout_s: float = 60.0
    embed_batch: int = 64

    # MEMORY.md (`<home>/memory/MEMORY.md`): polled for changes (mtime); 0 disables it.
    memory_md_poll_s: float = 2.0
    memory_md_namespace: str = "default"
    memory_md_retry_s: float = 60.0

    #: Refresh of the consumer-pending, DLQ-depth and disk-free gauges; 0 disables it.
    metrics_interval_s: float = 15.0

    @property
    def zvec_dir(self) -> Path:
        return self.home / "zvec"

    @property
    def memory_dir(self) -> Path:
        return self.home / "memory"
