"""The embedding caches and model prefixes (fakes, SQLite in tmp_path)."""

from __future__ import annotations

import random
from pathlib import Path

from embedder_fakes import FakeBackend
from totalrecall_embedder.adapters.embedding_cache import EmbeddingCache
from totalrecall_embedder.core.engine import Engine, EngineConfig
from totalrecall_embedder.core.query_lru import QueryLRU
from totalrecall_embedder.handlers import handle_batch_rpc
from totalrecall_embedder.metrics import Metrics
from totalrecall_schema import EmbedRequest


def test_cache_round_trips_published_vectors_exactly(tmp_path: Path) -> None:
    rnd = random.Random(1)
    vecs = [[round(rnd.uniform(-1, 1), 7) for _ in range(384)] for _ in range(5)]
    c = EmbeddingCache(tmp_path / "c.sqlite3")
    c.put_many("m:1", [(f"t{i}", v) for i, v in enumerate(vecs)])
    got = c.get_many("m:1", ["t0", "nope", "t4", "t0"])
    assert got == {0: vecs[0], 2: vecs[4], 3: vecs[0]}  # bit-identical after float32
    assert c.get_many("m:2", ["t0"]) == {}  # keyed by model fingerprint
    assert (c.hits, c.misses) == (3, 2) and len(c) == 5
    c.close()
    c2 = EmbeddingCache(tmp_path / "c.sqlite3")  # on disk: survives a restart
    assert len(c2) == 5 and c2.get_many("m:1", ["t3"]) == {0: vecs[3]}


def test_cache_evicts_least_recently_used(tmp_path: Path) -> None:
    now = [0.0]
    c = EmbeddingCache(tmp_path / "c.sqlite3", max_entries=10, clock=lambda: now[0])
    for i in range(10):
        now[0] = i
        c.put_many("m", [(f"t{i}", [1.0, 0.0])])
    now[0] = 100
    assert c.get_many("m", ["t0", "t1"]) == {0: [1.0, 0.0], 1: [1.0, 0.0]}  # touched
    now[0] = 101
    c.put_many("m", [("t10", [0.0, 1.0])])  # 11 > 10: down to 9, oldest used first
    assert len(c) == 9 and c.evicted == 2
    left = c.get_many("m", [f"t{i}" for i in range(11)])
    assert set(left) == {0, 1, 4, 5, 6, 7, 8, 9, 10}


def test_query_lru() -> None:
    q = QueryLRU(2)
    q.put("m", "a", [1.0])
    q.put("m", "b", [2.0])
    assert q.get("m", "a") == [1.0]
    q.put("m", "c", [3.0])  # evicts b (a was used)
    assert q.get("m", "b") is None and q.get("m", "a") == [1.0] and len(q) == 2


def make(tmp_path: Path, backend: FakeBackend, **cfg: object) -> tuple[Engine, Metrics]:
    m = Metrics()
    eng = Engine(EngineConfig(model_path=tmp_path / "x.gguf", **cfg),  # type: ignore[arg-type]
                 backend=backend, cache=EmbeddingCache(tmp_path / "c.sqlite3"),
                 on_cache=m.cache_hook)
    return eng, m


async def test_ingest_and_batch_rpc_do_not_re_embed(tmp_path: Path) -> None:
    b = FakeBackend()
    eng, m = make(tmp_path, b)
    first = await eng.embed_ingest(["alpha", "beta"])
    again = await eng.embed_ingest(["beta", "gamma", "alpha"])
    assert b.calls == [["alpha", "beta"], ["gamma"]]
    assert first is not None and again is not None
    assert again[0] == first[1] and again[2] == first[0]
    # a rebuild through rpc_embed_batch uses the same cache
    rep = await handle_batch_rpc(EmbedRequest(texts=["alpha", "gamma"], kind="document")
                                 .model_dump_json().encode(), eng, m)
    assert rep.vectors == [first[0], again[1]] and len(b.calls) == 2
    assert m.cache_requests.labels(cache="disk", result="hit")._value.get() == 4
    assert m.cache_requests.labels(cache="disk", result="miss")._value.get() == 3


async def test_failed_texts_are_not_cached(tmp_path: Path) -> None:
    b = FakeBackend(fail_on="poison")
    eng, _ = make(tmp_path, b)
    vecs = await eng.embed_ingest(["ok", "poison"])
    assert vecs is not None and vecs[1] is None
    assert eng.cache is not None and len(eng.cache) == 1


async def test_query_path_uses_the_in_memory_lru(tmp_path: Path) -> None:
    b = FakeBackend()
    eng, m = make(tmp_path, b)
    v1 = eng.embed_query(["why slow"])
    v2 = eng.embed_query(["why slow", "other"])
    assert v1[0] == v2[0] and b.calls == [["why slow"], ["other"]]
    assert m.cache_requests.labels(cache="query", result="hit")._value.get() == 1


async def test_nomic_models_get_their_prefixes(tmp_path: Path) -> None:
    b = FakeBackend(model_name="nomic-embed-text-v1.5.f16.gguf")
    eng, m = make(tmp_path, b)
    await eng.embed_ingest(["disk full"])
    eng.embed_query(["why slow"])
    await handle_batch_rpc(EmbedRequest(texts=["doc"], kind="document").model_dump_json()
                           .encode(), eng, m)
    await handle_batch_rpc(EmbedRequest(texts=["q"], kind="query").model_dump_json()
                           .encode(), eng, m)
    assert b.calls == [["search_document: disk full"], ["search_query: why slow"],
                       ["search_document: doc"], ["search_query: q"]]


async def test_explicit_prefixes_win(tmp_path: Path) -> None:
    b = FakeBackend(model_name="nomic-embed-text-v1.5.f16.gguf")
    eng, _ = make(tmp_path, b, query_prefix="query: ", document_prefix="")
    await eng.embed_ingest(["d"])
    eng.embed_query(["q"])
    assert b.calls == [["d"], ["query: q"]]
    minilm, _ = make(tmp_path / "m", FakeBackend(model_name="all-MiniLM-L6-v2.f16.gguf"))
    assert minilm.prefix("query") == "" and minilm.prefix("document") == ""
