"""A long query is embedded from its end: `tail_tokens` and the query path (fakes)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from embedder_fakes import FakeBackend
from totalrecall_embedder.core.backend import tail_tokens
from totalrecall_embedder.core.engine import Engine, EngineConfig
from totalrecall_embedder.metrics import Metrics


def words(text: str) -> int:
    """A tokenizer of whole words, plus [CLS] and [SEP] like the real one."""
    return len(text.split()) + 2


LOG = " ".join(f"line{i}" for i in range(1000)) + " why does nginx fail?"


def test_a_text_that_fits_is_kept_whole() -> None:
    assert tail_tokens("why does nginx fail?", 128, words) == "why does nginx fail?"
    assert tail_tokens(LOG, 0, words) == LOG  # 0: no limit


@pytest.mark.parametrize("limit", [3, 8, 40, 128])
def test_a_long_text_keeps_its_last_words_within_the_limit(limit: int) -> None:
    cut = tail_tokens(LOG, limit, words)
    assert words(cut) == limit  # as many as fit, no more
    assert cut == " ".join(LOG.split()[-(limit - 2):])  # whole words, from the end


def test_a_cut_inside_a_word_moves_on_to_the_next_word() -> None:
    # a "tokenizer" of 4-character pieces: the best cut lands inside "abcdefghij"
    def pieces(text: str) -> int:
        return sum(-(-len(w) // 4) for w in text.split())

    cut = tail_tokens("zzzz abcdefghij end", 2, pieces)
    assert cut == "end"


def test_one_word_longer_than_the_limit_is_cut_inside_it() -> None:
    def chars(text: str) -> int:
        return len(text)

    assert tail_tokens("x" * 100, 10, chars) == "x" * 10


class CountingBackend(FakeBackend):
    """A fake whose tokens are words, counted like LlamaBackend.count_tokens (specials in)."""

    def count_tokens(self, text: str) -> int:
        return words(text)


def engine(tmp_path: Path, backend: FakeBackend, **cfg: object) -> Engine:
    return Engine(EngineConfig(model_path=tmp_path / "x.gguf", **cfg),  # type: ignore[arg-type]
                  backend=backend, on_cache=Metrics().cache_hook)


def test_a_long_query_is_embedded_from_its_last_tokens(tmp_path: Path) -> None:
    b = CountingBackend()
    eng = engine(tmp_path, b, query_max_tokens=10)
    eng.embed_query(["why slow", LOG])
    short, long = b.calls[0]
    assert short == "why slow"
    assert words(long) == 10 and long.endswith("why does nginx fail?")
    # the answer is cached under the whole query: asked again, nothing is embedded
    eng.embed_query([LOG])
    assert len(b.calls) == 1


def test_the_prefix_is_kept_and_counted(tmp_path: Path) -> None:
    b = CountingBackend(model_name="nomic-embed-text-v1.5.f16.gguf")
    eng = engine(tmp_path, b, query_max_tokens=10)
    eng.embed_query([LOG])
    (sent,) = b.calls[0]
    assert sent.startswith("search_query: ") and words(sent) == 10


def test_documents_and_backends_without_a_tokenizer_are_not_cut(tmp_path: Path) -> None:
    b = CountingBackend()
    eng = engine(tmp_path, b, query_max_tokens=10)
    eng.embed_query([LOG], kind="document")
    assert b.calls == [[LOG]]
    plain = FakeBackend()  # e.g. the OpenAI-compatible fallback: its own limits apply
    engine(tmp_path / "p", plain, query_max_tokens=10).embed_query([LOG])
    assert plain.calls == [[LOG]]


def test_zero_embeds_the_query_as_it_is(tmp_path: Path) -> None:
    b = CountingBackend()
    engine(tmp_path, b, query_max_tokens=0).embed_query([LOG])
    assert b.calls == [[LOG]]


# --- exclusive queries: spread over the parallel threads while the machine is idle --------------
class ThreadedBackend(CountingBackend):
    """Records the threads each call ran on (`embed_on`, like LlamaBackend)."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.n_threads = 1
        self.device = "cpu"
        self.threads: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_on(texts, self.n_threads)

    def embed_on(self, texts: Sequence[str], n_threads: int) -> list[list[float]]:
        self.threads.append(n_threads)
        return super().embed(texts)


def spreading(tmp_path: Path, others: int | None, **cfg: object
              ) -> tuple[Engine, ThreadedBackend, list[bool], list[int]]:
    b = ThreadedBackend()
    seen: list[bool] = []
    asked: list[int] = []

    def probe(own: int) -> int | None:
        asked.append(own)
        return others

    eng = Engine(EngineConfig(model_path=tmp_path / "x.gguf", **cfg),  # type: ignore[arg-type]
                 backend=b, on_spread=seen.append, runnable=probe)
    return eng, b, seen, asked


def test_an_exclusive_query_on_an_idle_machine_uses_the_parallel_threads(tmp_path: Path) -> None:
    eng, b, seen, asked = spreading(tmp_path, others=0)
    eng.embed_query(["a long prompt"], exclusive=True)
    eng.embed_query(["a search phrase"])  # not exclusive: its caller searches beside it
    assert b.threads == [2, 1] and seen == [True]
    assert asked == [0]  # no ingest in flight: nothing of ours to discount


def test_an_exclusive_query_beside_a_busy_process_stays_on_one_thread(tmp_path: Path) -> None:
    for others in (1, 3, None):  # busy, or unknown (no /proc/loadavg)
        eng, b, seen, _ = spreading(tmp_path, others=others)
        eng.embed_query(["a long prompt"], exclusive=True)
        assert b.threads == [1] and seen == [False]


def test_spreading_is_off_at_one_thread_on_the_gpu_and_for_cached_queries(tmp_path: Path) -> None:
    eng, b, seen, _ = spreading(tmp_path, others=0, query_parallel_threads=1)
    eng.embed_query(["q"], exclusive=True)
    assert b.threads == [1] and seen == []
    eng, b, seen, _ = spreading(tmp_path, others=0)
    b.device = "gpu"
    eng.embed_query(["q"], exclusive=True)
    assert b.threads == [1] and seen == []
    b.device = "cpu"
    eng.embed_query(["q"], exclusive=True)  # answered from the query cache: nothing to spread
    assert b.threads == [1] and seen == []


def test_a_process_pinned_to_one_cpu_never_spreads(tmp_path: Path) -> None:
    eng, b, seen, _ = spreading(tmp_path, others=0)
    eng._cpus = 1  # what usable_cpus() says under `taskset -c 0`
    eng.embed_query(["a long prompt"], exclusive=True)
    assert b.threads == [1] and seen == []


def test_a_task_gone_within_the_looks_does_not_keep_the_query_on_one_thread(tmp_path: Path) -> None:
    b = ThreadedBackend()
    looks = iter([1, 1, 0])  # what delivered the request, still finishing; then nothing
    eng = Engine(EngineConfig(model_path=tmp_path / "x.gguf"), backend=b,
                 runnable=lambda own: next(looks))
    eng.embed_query(["a long prompt"], exclusive=True)
    assert b.threads == [2]


class BlockedIngest(ThreadedBackend):
    """An ingest batch that stays in flight until released."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.release = threading.Event(), threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.started.set()
        self.release.wait(5)
        return super().embed(texts)


async def test_our_own_ingest_in_flight_is_discounted(tmp_path: Path) -> None:
    eng, b, _, asked = spreading(tmp_path, others=0)
    ingest = BlockedIngest()
    task = asyncio.ensure_future(eng._on_ingest_thread(ingest, ["doc"]))
    assert await asyncio.to_thread(ingest.started.wait, 5)
    eng.embed_query(["a long prompt"], exclusive=True)  # the probe is told of one task of ours
    ingest.release.set()
    await task
    assert asked == [1] and b.threads == [2]
