"""bench/peers/workload: the latency corpus and the probes, on corpora made here."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.peers.workload import Corpus, Doc, Query, latency_corpus, namespace, probe
from eval.datasets import Turn

T0 = datetime(2024, 5, 1, tzinfo=UTC)


def turn(i: int) -> Turn:
    return Turn(id=f"D1:{i}", session="D1", index=i, speaker="Ann", text=f"line {i}",
                timestamp=T0)


def corpus(key: str, n: int, questions: list[str]) -> Corpus:
    docs = [Doc(t.id, t.full_text, t.timestamp, t) for t in map(turn, range(n))]
    return Corpus(key, "locomo", docs, [Query(f"{key}#{i}", "1", q, frozenset())
                                        for i, q in enumerate(questions)])


def test_latency_corpus_prefixes_ids_and_takes_distinct_questions() -> None:
    quality = [corpus("locomo/a", 3, ["q1", "q2"]), corpus("locomo/b", 3, ["q2", "q3"])]
    lat = latency_corpus(quality, n=5, n_queries=10)
    assert [d.id for d in lat.docs] == ["locomo/a/D1:0", "locomo/a/D1:1", "locomo/a/D1:2",
                                        "locomo/b/D1:0", "locomo/b/D1:1"]
    assert sorted(q.text for q in lat.queries) == ["q1", "q2", "q3"]
    assert latency_corpus(quality, n=5, n_queries=10).queries == lat.queries  # seeded order
    ev = lat.docs[3].event("ns")
    assert ev["id"] == "locomo/b/D1:0" and ev["namespace"] == "ns" and ev["summary"] == "Ann: line 0"
    assert lat.docs[3].session == "D1" and lat.docs[3].index == 0


def test_probes_are_distinct_and_ingestable() -> None:
    a, b = probe(0, T0), probe(1, T0)
    assert a.id != b.id and a.text != b.text
    ev = a.event("bench")
    assert ev["id"] == a.id and ev["summary"] == a.text and ev["namespace"] == "bench"
    assert probe(0, T0) == a                      # deterministic


def test_namespace_is_valid_for_every_system() -> None:
    ns = namespace("peers123", "logqa/HDFS")
    assert ns == "peers123.logqa-HDFS"


def test_bare_event_is_the_text_and_the_time_only() -> None:
    d = corpus("locomo/a", 1, []).docs[0]
    ev = d.bare_event("ns")
    assert ev == {"id": "D1:0", "namespace": "ns", "summary": "Ann: line 0",
                  "timestamp": T0.isoformat()}
    assert "metadata" in d.event("ns") and "actor" in d.event("ns")   # what the bare one drops
