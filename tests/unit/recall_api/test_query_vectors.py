"""The recall API's query vectors of recent questions (recall/query_vectors.py)."""

from __future__ import annotations

import asyncio

import pytest
from totalrecall_recall_api.recall.query_vectors import Embedding, QueryVectors


class Embedder:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.model = "m1"
        self.gate: asyncio.Event | None = None  # set: every request waits for it
        self.fail: Exception | None = None

    def ask(self, text: str):  # type: ignore[no-untyped-def]
        async def embed() -> Embedding:
            self.asked.append(text)
            if self.gate is not None:
                await self.gate.wait()
            if self.fail is not None:
                raise self.fail
            return [float(len(text)), 1.0], self.model
        return embed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_question_asked_again_is_not_sent_again_until_it_is_too_old() -> None:
    emb, clock = Embedder(), Clock()
    kept = QueryVectors(8, 60.0, clock)
    assert await kept.get("why did nginx fail", emb.ask("why did nginx fail")) == \
        ([18.0, 1.0], "m1")
    clock.now = 59.0
    assert await kept.get("why did nginx fail", emb.ask("why did nginx fail")) == \
        ([18.0, 1.0], "m1")
    assert emb.asked == ["why did nginx fail"]
    clock.now = 60.0
    emb.model = "m2"  # the embedder's model changed meanwhile: shows once the vector is old
    assert await kept.get("why did nginx fail", emb.ask("why did nginx fail")) == \
        ([18.0, 1.0], "m2")
    assert emb.asked == ["why did nginx fail"] * 2


async def test_the_least_recently_asked_question_goes_first() -> None:
    emb = Embedder()
    kept = QueryVectors(2, 60.0)
    for text in ("a", "b", "a", "c"):  # "b" is the least recently asked when "c" comes
        await kept.get(text, emb.ask(text))
    assert len(kept) == 2
    for text in ("a", "c", "b"):
        await kept.get(text, emb.ask(text))
    assert emb.asked == ["a", "b", "c", "b"]


async def test_recalls_of_one_new_question_at_once_share_one_request() -> None:
    emb = Embedder()
    emb.gate = asyncio.Event()
    kept = QueryVectors(8, 60.0)
    waiting = [asyncio.create_task(kept.get("disk full", emb.ask("disk full")))
               for _ in range(5)]
    await asyncio.sleep(0)
    emb.gate.set()
    assert {tuple(v) for v, _ in await asyncio.gather(*waiting)} == {(9.0, 1.0)}
    assert emb.asked == ["disk full"]


async def test_a_failure_reaches_every_waiter_and_is_not_kept() -> None:
    emb = Embedder()
    emb.gate, emb.fail = asyncio.Event(), TimeoutError("embedder down")
    kept = QueryVectors(8, 60.0)
    waiting = [asyncio.create_task(kept.get("q", emb.ask("q"))) for _ in range(3)]
    await asyncio.sleep(0)
    emb.gate.set()
    results = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(r, TimeoutError) for r in results)
    emb.fail = None
    assert await kept.get("q", emb.ask("q")) == ([1.0, 1.0], "m1")
    assert emb.asked == ["q", "q"]


async def test_the_asking_recall_cancelled_leaves_the_others_an_error_not_a_cancellation() -> None:
    emb = Embedder()
    emb.gate = asyncio.Event()
    kept = QueryVectors(8, 60.0)
    first = asyncio.create_task(kept.get("q", emb.ask("q")))
    await asyncio.sleep(0)
    second = asyncio.create_task(kept.get("q", emb.ask("q")))
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(RuntimeError, match="cancelled"):
        await second
    assert first.cancelled()
    emb.gate.set()
    assert await kept.get("q", emb.ask("q")) == ([1.0, 1.0], "m1")  # asked again


async def test_forgetting_a_model_drops_its_vectors_only() -> None:
    emb = Embedder()
    kept = QueryVectors(8, 60.0)
    await kept.get("a", emb.ask("a"))
    emb.model = "m2"
    await kept.get("b", emb.ask("b"))
    kept.forget_model("m1")
    await kept.get("a", emb.ask("a"))
    await kept.get("b", emb.ask("b"))
    assert emb.asked == ["a", "b", "a"]


@pytest.mark.parametrize(("entries", "age"), [(0, 60.0), (8, 0.0)])
async def test_off_asks_every_time(entries: int, age: float) -> None:
    emb = Embedder()
    kept = QueryVectors(entries, age)
    for _ in range(2):
        await kept.get("q", emb.ask("q"))
    assert emb.asked == ["q", "q"] and len(kept) == 0
