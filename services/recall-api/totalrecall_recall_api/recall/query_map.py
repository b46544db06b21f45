"""A question's vector mapped into the space where its answers lie, before the vector search.

A question and the memory that answers it are worded differently ("What activities has Melanie
done with her family?" / "Melanie: we went swimming with the kids"): MiniLM puts a question
nearer to other questions and to memories that repeat its words than to its answer. A linear
map of the question's vector, learned from questions and the memories that answer them
(`eval/query_adapter.py`, trained on the development data and checked on conversations and
questions it was not trained on), moves it towards its answers. Memories are embedded as they
were: only the question changes, so the map can be turned off, or replaced, without
re-indexing anything.

The map belongs to the model whose vectors it was learned on: a question embedded by another
model is searched as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ports import Embedder


@dataclass(frozen=True)
class QueryMap:
    """`matrix` (d × d) maps the vectors of the models whose fingerprint starts with `model`."""

    matrix: np.ndarray
    model: str

    def fits(self, model: str | None, dims: int) -> bool:
        return model is not None and model.startswith(self.model) \
            and self.matrix.shape == (dims, dims)

    def apply(self, vector: list[float]) -> list[float]:
        """The mapped vector, unit length (the index compares by cosine)."""
        out = self.matrix @ np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(out))
        return (out / norm).tolist() if norm > 0 else list(vector)


class MappedQueries:
    """`Embedder` whose question vectors go through `query_map` when it fits their model;
    everything else is the wrapped embedder's (a local query model's `model_refused`…)."""

    def __init__(self, inner: Embedder, query_map: QueryMap) -> None:
        self.inner, self.query_map = inner, query_map

    async def embed_query(self, text: str, *, exclusive: bool = False
                          ) -> tuple[list[float], str | None]:
        vector, model = await self.inner.embed_query(text, exclusive=exclusive)
        if self.query_map.fits(model, len(vector)):
            vector = self.query_map.apply(vector)
        return vector, model

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)
