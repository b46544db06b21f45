"""The floor embeds what a recall embeds of each text (`bench/floor.py`), not the whole prompt."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from bench.floor import embedding_floor


class _Words:
    """A backend whose tokens are words; it records what it was asked to embed."""

    embedded: ClassVar[list[tuple[int, str]]] = []

    def __init__(self, model: Path, n_threads: int = 1) -> None:
        self.n_threads = n_threads

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.extend((self.n_threads, t) for t in texts)
        return [[0.0] for _ in texts]

    def close(self) -> None:
        pass


def test_a_long_prompt_is_cut_to_the_end_a_recall_embeds(monkeypatch: pytest.MonkeyPatch) -> None:
    import totalrecall_worker.llama_model as llama_model

    monkeypatch.setattr(llama_model, "LlamaBackend", _Words)
    monkeypatch.setenv("TR_EMBEDDER_QUERY_PREFIX", "query: ")
    monkeypatch.setenv("TR_EMBEDDER_QUERY_MAX_TOKENS", "6")
    _Words.embedded.clear()
    prompt = " ".join(f"w{i}" for i in range(40)) + " why did nginx fail?"
    floor = embedding_floor([prompt, "disk full?"], Path("model.gguf"), threads=(1, 2))

    asked = {text for _, text in _Words.embedded}  # 6 tokens, the prefix counted
    assert asked == {"query: w39 why did nginx fail?", "query: disk full?"}
    # each thread count embeds the same texts (no prefix added twice)
    assert {t for t, _ in _Words.embedded} == {1, 2}
    assert set(floor.per_threads) == {1, 2}
