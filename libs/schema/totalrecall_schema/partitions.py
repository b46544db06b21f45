"""Index partitions: which indexer writes a memory, and which ones a recall must hear from.

An installation splits its vector index into `count` partitions (`TR_PARTITIONS`, 1 on a
single machine). A memory's partition is a deterministic function of its namespace and host
(`partition_of`): the embedder publishes each embedded event on its partition's subject
(`Topology.embedded_subject_of`), each partition has one durable consumer, and the indexer that
owns a partition is that consumer's only reader, so each partition has exactly one writer.
Recall asks every partition's owner at once and merges their answers.

The hash is FNV-1a (32 bits), the hash nats-server's own `partition()` subject mapping uses:
were namespace and host subject tokens some day, the server could map them the same way.
Changing `count` moves memories between partitions: every indexer then rebuilds its part from
its Markdown logs (`totalrecall rebuild`), or the installation keeps its count.
"""

from __future__ import annotations

from collections.abc import Iterable

#: The most partitions an installation may have (a partition is a durable consumer and an
#: owner's share of the vector index: a few per indexer, not thousands).
MAX_PARTITIONS = 256

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv1a32(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def partition_of(namespace: str, host: str | None, count: int) -> int:
    """The partition (0 … count-1) of the memories of `namespace` that happened on `host` (a
    normalised hostname, as `EventMetadata.hostname` gives it; None or "" for none)."""
    if count <= 1:
        return 0
    return fnv1a32(f"{namespace}\x00{host or ''}".encode()) % count


def parse_partitions(spec: str | Iterable[int] | None, count: int) -> tuple[int, ...]:
    """The partitions an indexer owns: `"0,2"`, `"0-3"`, `"all"`/""/None (every one), or ints.
    ValueError for one outside 0 … count-1."""
    if not 1 <= count <= MAX_PARTITIONS:
        raise ValueError(f"the partition count must be 1..{MAX_PARTITIONS}, got {count}")
    if spec is None or (isinstance(spec, str) and spec.strip().lower() in ("", "all")):
        return tuple(range(count))
    found: set[int] = set()
    if isinstance(spec, str):
        for part in (p.strip() for p in spec.split(",") if p.strip()):
            lo, sep, hi = part.partition("-")
            try:
                first, last = int(lo), int(hi if sep else lo)
            except ValueError:
                raise ValueError(f"not a partition or range: {part!r}") from None
            found.update(range(first, last + 1))
    else:
        found.update(int(p) for p in spec)
    bad = sorted(p for p in found if not 0 <= p < count)
    if bad or not found:
        raise ValueError(f"partitions {bad or 'none'} are not among 0..{count - 1}")
    return tuple(sorted(found))
