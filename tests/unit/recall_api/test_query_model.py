"""The local query model (`adapters/query_model.py`) with fakes: questions go to the embedder
until a probe embedded both ways agrees, and whenever it does not."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from totalrecall_recall_api.adapters import query_model
from totalrecall_recall_api.adapters.query_model import LocalQueryEmbedder, load_query_embedder


class FakeBackend:
    fingerprint = "mini:abc"
    n_threads = 1

    def __init__(self, vector: list[float]) -> None:
        self.vector, self.calls, self.threads, self.closed = vector, [], [], False

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def embed_on(self, texts: Sequence[str], n_threads: int) -> list[list[float]]:
        self.calls += list(texts)
        self.threads.append(n_threads)
        return [list(self.vector) for _ in texts]

    def close(self) -> None:
        self.closed = True


class FakeRpc:
    def __init__(self, vector: list[float], model: str = "mini:abc", fail: bool = False) -> None:
        self.vector, self.model, self.fail, self.asked = vector, model, fail, []

    async def embed_query(self, text: str, *, exclusive: bool = False
                          ) -> tuple[list[float], str | None]:
        self.asked.append(text)
        if self.fail:
            raise TimeoutError("no embedder")
        return list(self.vector), self.model


def local(backend: FakeBackend, rpc: FakeRpc, **kw: int) -> LocalQueryEmbedder:
    return LocalQueryEmbedder(backend, rpc, prefix="q: ", max_tokens=kw.get("max_tokens", 4),
                              parallel_threads=kw.get("parallel", 1))


async def settle(emb: LocalQueryEmbedder) -> None:
    while emb._probe is not None:
        await asyncio.sleep(0)


def test_remote_until_the_probe_agrees_then_local() -> None:
    async def go() -> None:
        b, rpc = FakeBackend([0.6, 0.8]), FakeRpc([0.6, 0.8000001])
        emb = local(b, rpc)
        assert await emb.embed_query("first") == ([0.6, 0.8000001], "mini:abc")  # the RPC's
        await settle(emb)
        assert emb.agreed is True and rpc.asked == ["first", query_model.PROBE]
        vec, model = await emb.embed_query("one two three four five six")
        assert (vec, model) == ([0.6, 0.8], "mini:abc")
        # the embedder's cut: the prefix and the question's last tokens (4 with the prefix)
        assert b.calls[-1] == "q: four five six"
        assert rpc.asked[-1] == query_model.PROBE  # not asked again
        emb.close()
        assert b.closed
    asyncio.run(go())


def test_another_vector_or_model_keeps_questions_on_the_embedder() -> None:
    async def go() -> None:
        for rpc in (FakeRpc([0.8, 0.6]), FakeRpc([0.6, 0.8], model="other:123")):
            emb = local(FakeBackend([0.6, 0.8]), rpc)
            await emb.embed_query("a")
            await settle(emb)
            assert emb.agreed is False
            assert await emb.embed_query("b") == (rpc.vector, rpc.model)
            assert rpc.asked[-1] == "b" and emb._probe is None  # not compared again so soon
            emb._probed_at -= query_model.RECHECK_S  # a minute later: compared again
            rpc.vector, rpc.model = [0.6, 0.8], "mini:abc"  # the embedder has our model now
            await emb.embed_query("c")
            await settle(emb)
            assert emb.agreed is True
            emb.close()
    asyncio.run(go())


def test_an_embedder_not_up_is_asked_again_later() -> None:
    async def go() -> None:
        rpc = FakeRpc([0.6, 0.8], fail=True)
        emb = local(FakeBackend([0.6, 0.8]), rpc)
        with contextlib.suppress(TimeoutError):
            await emb.embed_query("a")
        await settle(emb)
        assert emb.agreed is None and rpc.asked == ["a", query_model.PROBE]
        rpc.fail = False
        await emb.embed_query("b")
        assert emb._probe is None  # too soon: no second probe yet
        emb._probed_at -= query_model.RETRY_S
        await emb.embed_query("c")
        await settle(emb)
        assert emb.agreed is True
        emb.model_refused("other:1")
        assert emb.agreed is True
        emb.model_refused("mini:abc")  # the index refused our vectors: compared again
        assert emb.agreed is None
        emb.close()
    asyncio.run(go())


def test_a_long_prompt_is_spread_only_while_the_machine_is_idle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    b = FakeBackend([1.0])
    emb = local(b, FakeRpc([1.0]), parallel=2)
    seen: list[bool] = []
    emb.on_spread = seen.append  # the recall API counts them (totalrecall_recall_query_spread_total)
    monkeypatch.setattr("totalrecall_worker.priority.machine_idle", lambda *a, **k: True)
    emb._embed("x", True)
    emb._embed("x", False)  # a short question: its keyword search runs beside it
    monkeypatch.setattr("totalrecall_worker.priority.machine_idle", lambda *a, **k: False)
    emb._embed("x", True)
    assert b.threads == [2, 1, 1]
    assert seen == [True, False]
    emb.close()


def test_no_model_file_means_the_embedder(tmp_path: Path) -> None:
    rpc = FakeRpc([1.0])
    assert load_query_embedder(tmp_path / "missing.gguf", rpc, prefix=None, max_tokens=128,
                               threads=1, parallel_threads=2) is None
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    assert load_query_embedder(broken, rpc, prefix=None, max_tokens=128, threads=1,
                               parallel_threads=2) is None


class HeldBackend(FakeBackend):
    """Holds each call until `parties` calls compute at once."""

    def __init__(self, vector: list[float], barrier: threading.Barrier) -> None:
        super().__init__(vector)
        self.barrier = barrier

    def embed_on(self, texts: Sequence[str], n_threads: int) -> list[list[float]]:
        self.barrier.wait(timeout=10)
        return super().embed_on(texts, n_threads)


def test_questions_asked_at_once_are_embedded_at_once_one_per_context() -> None:
    async def go() -> None:
        barrier = threading.Barrier(2)
        a, b = HeldBackend([0.6, 0.8], barrier), HeldBackend([0.6, 0.8], barrier)
        emb = LocalQueryEmbedder(a, FakeRpc([0.6, 0.8]), prefix="q: ", max_tokens=4,
                                 spares=[b])
        # Neither finishes until both compute together: on one context they would deadlock.
        got = await asyncio.wait_for(asyncio.gather(
            emb._local("why is it slow", False), emb._local("what failed", False)), timeout=20)
        assert got == [[0.6, 0.8], [0.6, 0.8]]
        assert len(a.calls) == len(b.calls) == 1
        emb.close()
        assert a.closed and b.closed
    asyncio.run(go())


def test_a_context_that_fails_to_load_closes_those_that_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[FakeBackend] = []

    def second_fails(path: Path, *, n_threads: int, fingerprint: str | None = None
                     ) -> FakeBackend:
        if made:
            raise RuntimeError("out of memory")
        made.append(FakeBackend([1.0]))
        return made[-1]
    monkeypatch.setattr("totalrecall_worker.llama_model.LlamaBackend", second_fails)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x")
    assert load_query_embedder(model, FakeRpc([1.0]), prefix=None, max_tokens=128, threads=1,
                               parallel_threads=2, contexts=2) is None
    assert len(made) == 1 and made[0].closed
