"""The partition contract: a deterministic, spread mapping of namespace and host, the subjects
and durable consumers of each partition, and the owned-partition setting."""

from __future__ import annotations

import collections

import pytest
from totalrecall_schema import EventMetadata, MemoryEvent, Topology
from totalrecall_schema.partitions import fnv1a32, parse_partitions, partition_of


def test_fnv1a32_is_the_reference_hash() -> None:
    # The FNV-1a test vectors (the hash nats-server's partition() mapping uses).
    assert fnv1a32(b"") == 0x811C9DC5
    assert fnv1a32(b"a") == 0xE40C292C
    assert fnv1a32(b"foobar") == 0xBF9CF968


def test_one_partition_is_always_zero() -> None:
    assert partition_of("default", "db-01", 1) == 0
    assert partition_of("anything", None, 1) == 0


def test_the_mapping_is_deterministic_and_spreads_hosts() -> None:
    hosts = [f"host-{i:03d}" for i in range(300)]
    first = [partition_of("default", h, 4) for h in hosts]
    assert first == [partition_of("default", h, 4) for h in hosts]
    counts = collections.Counter(first)
    assert set(counts) == {0, 1, 2, 3}
    assert min(counts.values()) >= 300 / 4 * 0.6  # no partition starved
    # The namespace is part of the key: one host's memories of two namespaces may part ways.
    assert len({partition_of(ns, "db-01", 8) for ns in ("a", "b", "c", "d", "e", "f")}) > 1


@pytest.mark.parametrize(("spec", "count", "want"), [
    ("", 3, (0, 1, 2)), ("all", 2, (0, 1)), (None, 1, (0,)), ("1", 2, (1,)),
    ("0,2", 4, (0, 2)), ("1-3", 4, (1, 2, 3)), (" 2 , 0-1 ", 3, (0, 1, 2)), ([1, 0], 2, (0, 1)),
])
def test_owned_partitions_parse(spec: object, count: int, want: tuple[int, ...]) -> None:
    assert parse_partitions(spec, count) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(("spec", "count"), [("2", 2), ("-1", 2), ("x", 2), (",", 2), ("0", 0)])
def test_bad_owned_partitions_are_refused(spec: str, count: int) -> None:
    with pytest.raises(ValueError):
        parse_partitions(spec, count)


def test_one_partition_keeps_the_subjects_and_consumer_of_before() -> None:
    t = Topology()
    ev = MemoryEvent(id="x", category="system.service", summary="s",
                     metadata=EventMetadata(host="db-01"))
    assert t.embedded_subject_of(ev) == "memory.embedded.system.service"
    assert t.embedded_filter(0) == "memory.embedded.>"
    assert t.indexer_durable_of(0) == "indexer" and t.indexer_durables == ["indexer"]
    embedded = next(c for c in t.stream_configs() if c.name == t.embedded_stream)
    assert embedded.subjects == ["memory.embedded.>"]


def test_each_partition_has_its_subjects_and_durable() -> None:
    t = Topology(partitions=3)
    ev = MemoryEvent(id="x", namespace="ops", category="system.service", summary="s",
                     metadata=EventMetadata(host="DB-01."))  # normalised before hashing
    p = partition_of("ops", "db-01", 3)
    assert t.partition_of(ev) == p
    assert t.embedded_subject_of(ev) == f"memory.partition.{p}.embedded.system.service"
    assert t.embedded_filter(p) == f"memory.partition.{p}.embedded.>"
    assert t.indexer_durables == ["indexer-p0", "indexer-p1", "indexer-p2"]
    embedded = next(c for c in t.stream_configs() if c.name == t.embedded_stream)
    assert embedded.subjects == ["memory.embedded.>", "memory.partition.*.embedded.>"]
    with pytest.raises(ValueError):
        t.embedded_filter(3)
    with pytest.raises(ValueError):
        Topology(partitions=0)
