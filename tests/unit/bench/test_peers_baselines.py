"""bench/peers/baselines: the keyword baselines rank what they should, on memories made here."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import numpy as np

from bench.peers.baseline_adapter import serve
from bench.peers.baselines import Bm25sPeer, SqliteFtsPeer, fts5_query, minmax, top_ids
from bench.peers.workload import Doc

T0 = datetime(2024, 5, 1, tzinfo=UTC)
DOCS = [Doc("a", "nginx failed to bind port 443 after the upgrade", T0, None),
        Doc("b", "the backup job finished in 12 minutes", T0, None),
        Doc("c", "postgres restarted: out of memory", T0, None)]


def test_fts5_query_quotes_and_ors_the_words() -> None:
    assert fts5_query('Why did "nginx" fail? (port 443)') == \
        '"why" OR "did" OR "nginx" OR "fail" OR "port" OR "443"'
    assert fts5_query("?!") == ""


def test_sqlite_fts5_ranks_by_bm25_within_the_namespace() -> None:
    peer = SqliteFtsPeer()
    peer.start()
    try:
        peer.add("ns", DOCS)
        peer.add("other", [Doc("x", "nginx nginx nginx port", T0, None)])
        assert peer.search("ns", "why did nginx fail on port 443?", 10) == ["a"]
        assert peer.search("ns", "memory of postgres", 10) == ["c"]
        assert peer.search("ns", "?", 10) == []
    finally:
        peer.stop()


def test_bm25s_indexes_what_was_added_since_the_last_search() -> None:
    peer = Bm25sPeer()
    peer.add("ns", DOCS)
    assert peer.search("ns", "backup minutes", 10) == ["b"]
    peer.add("ns", [Doc("d", "a second backup failed", T0, None)])
    assert peer.search("ns", "backup", 10)[0] in {"b", "d"} and len(peer.search("ns", "backup", 10)) == 2
    assert peer.search("missing", "backup", 10) == []


def test_fusion_helpers() -> None:
    assert minmax(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, 0.5]
    assert minmax(np.array([1.0, 1.0])).tolist() == [0.0, 0.0]
    assert top_ids(["a", "b", "c"], np.array([0.0, 2.0, 1.0]), 3, positive_only=True) == ["b", "c"]


def test_adapter_speaks_the_json_lines_protocol() -> None:
    reqs = [{"op": "info"},
            {"op": "add", "ns": "ns", "docs": [{"id": d.id, "text": d.text,
                                                "ts": d.ts.isoformat()} for d in DOCS]},
            {"op": "flush"}, {"op": "search", "ns": "ns", "query": "backup", "k": 5},
            {"op": "nope"}, {"op": "quit"}, {"op": "info"}]
    out = io.StringIO()
    serve(SqliteFtsPeer(), io.StringIO("".join(json.dumps(r) + "\n" for r in reqs)), out)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(answers) == 5                                  # nothing after quit
    assert answers[0]["config"]["tokenizer"] == "porter unicode61"
    assert answers[1] == {"added": 3} and answers[2] == {}
    assert answers[3]["ids"] == ["b"] and "error" in answers[4]
