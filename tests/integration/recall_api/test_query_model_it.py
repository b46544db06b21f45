"""The recall API's own query model embeds a question exactly as the embedder's query RPC does
(the real GGUF): same vector, bit for bit, same model fingerprint, for a short question and for
a prompt longer than the query token limit (cut to its end in both)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from totalrecall_embedder.core import Engine, EngineConfig
from totalrecall_recall_api.adapters.query_model import LocalQueryEmbedder, load_query_embedder

QUESTIONS = [
    "why did nginx fail?",
    "Here is what the journal shows:\n" + "\n".join(
        f"Nov 25 09:{m:02d}:00 host nginx[4{m}]: connect() failed (111: Connection refused) "
        f"while connecting to upstream, client: 10.0.0.{m}" for m in range(12))
    + "\nWhat is going on with nginx, and is it the same problem as last week?",
]


class EngineRpc:
    """The embedder's query RPC without NATS: what its handler computes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def embed_query(self, text: str, *, exclusive: bool = False
                          ) -> tuple[list[float], str | None]:
        return self.engine.embed_query([text])[0], self.engine.fingerprint


def test_local_question_vectors_are_the_embedders(model_path: Path) -> None:
    engine = Engine(EngineConfig(model_path=model_path))
    assert asyncio.run(engine.load())
    try:
        rpc = EngineRpc(engine)
        local = load_query_embedder(model_path, rpc, prefix=None, max_tokens=128, threads=1,
                                    parallel_threads=1)
        assert isinstance(local, LocalQueryEmbedder)
        try:
            assert local.backend.count_tokens(QUESTIONS[1]) > 128  # the cut is exercised
            for q in QUESTIONS:
                theirs, model = asyncio.run(rpc.embed_query(q))
                assert local._embed(q, False) == theirs
                assert local.model == model
            asyncio.run(local.compare())
            assert local.agreed is True
            ours, model = asyncio.run(local.embed_query(QUESTIONS[0]))
            assert model == engine.fingerprint and len(ours) == engine.dim
        finally:
            local.close()
    finally:
        engine.close()


def test_a_prefix_the_embedder_does_not_use_is_refused(model_path: Path) -> None:
    engine = Engine(EngineConfig(model_path=model_path))
    assert asyncio.run(engine.load())
    try:
        local = load_query_embedder(model_path, EngineRpc(engine), prefix="search_query: ",
                                    max_tokens=128, threads=1, parallel_threads=1)
        assert local is not None
        try:
            asyncio.run(local.compare())
            assert local.agreed is False
        finally:
            local.close()
    finally:
        engine.close()
