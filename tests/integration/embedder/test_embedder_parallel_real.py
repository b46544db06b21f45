"""Ingest on every core with the real model: a batch split among two one-thread llama.cpp
contexts gives the very vectors of one context alone (each text is pooled on its own, so
which texts share a decode does not change its vector)."""

from __future__ import annotations

from pathlib import Path

from totalrecall_embedder.core.backend import LlamaBackend
from totalrecall_embedder.core.parallel import ParallelBackend


def test_two_contexts_give_one_contexts_vectors(model_path: Path) -> None:
    texts = [f"sshd[{900 + i}]: Failed password for invalid user admin{i} from 10.0.0.{i} port "
             f"{40000 + i} ssh2" for i in range(13)] + ["disk /dev/sda1 is 97% full", "ok"]
    one = LlamaBackend(model_path, n_threads=1)
    par = ParallelBackend([LlamaBackend(model_path, n_threads=1) for _ in range(2)])
    try:
        assert par.embed(texts) == one.embed(texts)
        assert par.embed(texts[:1]) == one.embed(texts[:1])
    finally:
        one.close()
        par.close()
