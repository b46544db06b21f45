"""A long query is embedded from its end: `tail_tokens` and the query path (fakes)."""

from __future__ import annotations

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
