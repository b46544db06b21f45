"""Stream and subject names: defined here and nowhere else.

A `Topology` carries a prefix so that tests (and several installations on one NATS server) get
their own streams and subjects: `Topology()` is production (`memory.*`, `MEMORY_*`).

Events come in on two forms of subject, both captured by the events stream:
- `<prefix>.events.<category>`: the workstation's own publishers (its watchers, the recall API,
  the CLI's imports), trusted to name any host;
- `<prefix>.host.<token>.events.<category>`: a remote host's watchers, where `<token>` is the
  host's name as one subject token (`host_token`). A cluster's NATS user of that host may publish
  there and nowhere else (deploy/nats/cluster/), and the embedder dead-letters an event whose
  `metadata.host` is another host: a host can only speak for itself.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from .host import normalize_hostname
from .partitions import MAX_PARTITIONS, partition_of

if TYPE_CHECKING:
    from .events import MemoryEvent

#: How long JetStream remembers a Nats-Msg-Id for publish-side dedup.
DUPLICATE_WINDOW_S = 600.0
EVENTS_MAX_AGE_S = 14 * 24 * 3600
#: JetStream keeps a stream on at most this many servers (an odd number for its Raft quorum).
MAX_REPLICAS = 5

# A hostname as one subject token: `.` separates tokens, so it becomes `_`; the letters, digits
# and `-` of a DNS name stay; anything else (`_` itself, `%`, a wildcard, spaces, non-ASCII) is
# written `%XX` per UTF-8 byte. Injective (`_` never stands for itself), so comparing tokens
# compares hostnames; and a hostname has one token only (`host_from_token` takes no other).
_TOKEN_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_TOKEN_RE = re.compile(r"^(?:[a-z0-9-]|_|%[0-9A-F]{2})+$")


def host_token(host: str) -> str:
    """`host` (normalised: `host.normalize_hostname`) as one NATS subject token:
    `db-01.example.com` → `db-01_example_com`."""
    name = normalize_hostname(host)
    if not name:
        raise ValueError(f"no hostname in {host!r}")
    out: list[str] = []
    for ch in name:
        if ch in _TOKEN_PLAIN:
            out.append(ch)
        elif ch == ".":
            out.append("_")
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def host_from_token(token: str) -> str:
    """The hostname `host_token` made `token` from (ValueError: not such a token)."""
    if not _TOKEN_RE.match(token):
        raise ValueError(f"not a host token: {token!r}")
    raw = bytearray()
    i = 0
    while i < len(token):
        ch = token[i]
        if ch == "%":
            raw.append(int(token[i + 1:i + 3], 16))
            i += 3
            continue
        raw.extend(b"." if ch == "_" else ch.encode("ascii"))
        i += 1
    host = raw.decode("utf-8", errors="replace")
    if not normalize_hostname(host) or host_token(host) != token:  # `%61` for `a`, `%2E` for `_`
        raise ValueError(f"not a host token: {token!r}")
    return host


@dataclass(frozen=True)
class Topology:
    prefix: str = "memory"
    stream_prefix: str = "MEMORY"
    #: Servers each stream is kept on: 1 on a single machine, 3 on a cluster
    #: (`TR_NATS_REPLICAS`; deploy/nats/cluster/).
    replicas: int = 1
    #: Partitions of the vector index (`partitions.py`, `TR_PARTITIONS`): 1 keeps the subjects
    #: and the consumer of a single indexer; more give each its subject and durable consumer.
    partitions: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.replicas <= MAX_REPLICAS:
            raise ValueError(f"replicas must be 1..{MAX_REPLICAS}, got {self.replicas}")
        if not 1 <= self.partitions <= MAX_PARTITIONS:
            raise ValueError(f"partitions must be 1..{MAX_PARTITIONS}, got {self.partitions}")

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

    def embedded_subject(self, category: str, partition: int = 0) -> str:
        """Where an embedded event of `category` in `partition` is published: one partition
        keeps `<prefix>.embedded.<category>`; several put each in its own subtree,
        `<prefix>.partition.<n>.embedded.<category>`, which its owner's consumer filters."""
        if self.partitions == 1:
            return f"{self.prefix}.embedded.{category}"
        return f"{self.embedded_root(partition)}.{category}"

    def embedded_subject_of(self, event: MemoryEvent) -> str:
        """`embedded_subject` of `event`'s category and partition (its namespace and host)."""
        return self.embedded_subject(event.category, self.partition_of(event))

    def partition_of(self, event: MemoryEvent) -> int:
        return partition_of(event.namespace, event.metadata.hostname, self.partitions)

    def embedded_root(self, partition: int) -> str:
        if not 0 <= partition < self.partitions:
            raise ValueError(f"partition {partition} is not among 0..{self.partitions - 1}")
        return f"{self.prefix}.partition.{partition}.embedded"

    def embedded_filter(self, partition: int) -> str:
        """The subjects of one partition's embedded events (its consumer's filter)."""
        if self.partitions == 1:
            return self.embedded_all
        return f"{self.embedded_root(partition)}.>"

    @property
    def embedded_subjects(self) -> list[str]:
        """The embedded stream's subjects."""
        if self.partitions == 1:
            return [self.embedded_all]
        return [self.embedded_all, f"{self.prefix}.partition.*.embedded.>"]

    def dlq_subject(self, stage: str) -> str:
        return f"{self.prefix}.dlq.{stage}"

    @property
    def events_all(self) -> str:
        return f"{self.prefix}.events.>"

    # --- host-scoped events (remote hosts) -------------------------------------------------
    def host_events_subject(self, host: str, category: str) -> str:
        """Where a remote `host` publishes its events of `category`."""
        return f"{self.host_events_root(host)}.{category}"

    def host_events_of(self, host: str) -> str:
        """Every event subject of `host` (its NATS user's publish permission)."""
        return f"{self.host_events_root(host)}.>"

    def host_events_root(self, host: str) -> str:
        return f"{self.prefix}.host.{host_token(host)}.events"

    @property
    def host_events_all(self) -> str:
        """Every remote host's events (the events stream captures them beside `events_all`)."""
        return f"{self.prefix}.host.*.events.>"

    @property
    def event_subjects(self) -> list[str]:
        """Every subject an event comes in on: the events stream's, the embedder's filter."""
        return [self.events_all, self.host_events_all]

    def host_of_subject(self, subject: str) -> str | None:
        """The hostname a host-scoped event subject names; None for a local subject (or any
        other). ValueError for a host-scoped subject whose token `host_token` cannot have made."""
        parts = subject.split(".")
        head = self.prefix.split(".")
        n = len(head)
        if (len(parts) < n + 4 or parts[:n] != head or parts[n] != "host"
                or parts[n + 2] != "events"):
            return None
        return host_from_token(parts[n + 1])

    def host_inbox_prefix(self, host: str) -> str:
        """The reply inbox of a remote host's connection (its PubAcks come back there): its own,
        so that its NATS user may subscribe to it without reading anyone else's replies (the
        services' request replies carry memories)."""
        return f"_INBOX.{self.prefix}.host.{host_token(host)}"

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

    def indexer_durable_of(self, partition: int) -> str:
        """The durable consumer of one partition (`indexer` when there is one)."""
        if self.partitions == 1:
            return self.indexer_durable
        return f"{self.indexer_durable}-p{partition}"

    @property
    def partition_owners_bucket(self) -> str:
        """The key-value bucket of the partitions' leases (the indexer's `adapters/partition_lease.py`)."""
        return f"{self.stream_prefix}_PARTITION_OWNERS"

    @property
    def indexer_durables(self) -> list[str]:
        return [self.indexer_durable_of(p) for p in range(self.partitions)]

    def stream_configs(self) -> list[StreamConfig]:
        common = dict(
            storage=StorageType.FILE,
            retention=RetentionPolicy.LIMITS,
            discard=DiscardPolicy.OLD,
            duplicate_window=DUPLICATE_WINDOW_S,
            num_replicas=self.replicas,
        )
        return [
            StreamConfig(name=self.events_stream, subjects=self.event_subjects,
                         max_age=EVENTS_MAX_AGE_S, **common),  # type: ignore[arg-type]
            StreamConfig(name=self.embedded_stream, subjects=self.embedded_subjects,
                         max_age=EVENTS_MAX_AGE_S, **common),  # type: ignore[arg-type]
            StreamConfig(name=self.dlq_stream, subjects=[self.dlq_all],
                         max_age=90 * 24 * 3600, **common),  # type: ignore[arg-type]
        ]


async def ensure_streams(js: object, topology: Topology) -> None:
    """Create or update every stream of `topology` (idempotent; safe from every service): an
    existing stream takes the topology's subjects and replica count (JetStream moves a stream
    between R1 and R3 in place)."""
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


async def ensure_streams_when_ready(js: object, topology: Topology, *, wait_s: float = 120.0,
                                    every_s: float = 1.0) -> None:
    """`ensure_streams`, retried while JetStream cannot answer yet (a cluster electing its meta
    leader after a node died, or still forming) for up to `wait_s`: a service that starts then
    waits for the cluster instead of exiting."""
    import asyncio
    import logging
    import time

    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.errors import ServiceUnavailableError

    deadline = time.monotonic() + wait_s
    while True:
        try:
            await ensure_streams(js, topology)
            return
        except (NatsTimeout, NoRespondersError, ServiceUnavailableError, TimeoutError) as exc:
            if time.monotonic() >= deadline:
                raise
            logging.getLogger("totalrecall.nats").warning(
                "JetStream not answering yet (%s); the streams are made once it does",
                type(exc).__name__)
            await asyncio.sleep(every_s)

