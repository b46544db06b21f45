"""The question map (recall/query_map.py, adapters/query_map_file.py): a learned linear map of a
question's vector, applied to the vectors of its model only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from totalrecall_recall_api.adapters.query_map_file import load_query_map
from totalrecall_recall_api.recall.query_map import MappedQueries, QueryMap
from totalrecall_recall_api.settings import Settings


class Embedder:
    def __init__(self, vector: list[float], model: str | None) -> None:
        self.vector, self.model = vector, model
        self.refused: list[str | None] = []

    async def embed_query(self, text: str, *, exclusive: bool = False
                          ) -> tuple[list[float], str | None]:
        return list(self.vector), self.model

    def model_refused(self, model: str | None) -> None:
        self.refused.append(model)


def swap() -> QueryMap:
    """A map that swaps the two dimensions and doubles the first: easy to check by hand."""
    return QueryMap(matrix=np.array([[0.0, 2.0], [1.0, 0.0]], dtype=np.float32),
                    model="all-MiniLM-L6-v2")


def test_a_mapped_vector_is_the_product_at_unit_length() -> None:
    out = swap().apply([0.6, 0.8])
    expect = np.array([1.6, 0.6]) / np.linalg.norm([1.6, 0.6])
    assert np.allclose(out, expect, atol=1e-6)
    assert abs(float(np.linalg.norm(out)) - 1.0) < 1e-6


def test_a_map_fits_the_models_of_its_family_and_dimension_only() -> None:
    m = swap()
    assert m.fits("all-MiniLM-L6-v2.q8_0:0123456789ab", 2)
    assert m.fits("all-MiniLM-L6-v2.f16-bf1d74689ea4-ctx512", 2)
    assert not m.fits("nomic-embed-text-v1.5.Q8_0:0123", 2)
    assert not m.fits(None, 2)
    assert not m.fits("all-MiniLM-L6-v2.q8_0:0123456789ab", 384)


async def test_questions_of_the_maps_model_are_mapped_others_searched_as_embedded() -> None:
    mapped = MappedQueries(Embedder([0.6, 0.8], "all-MiniLM-L6-v2.q8_0:abc"), swap())
    vec, model = await mapped.embed_query("why did nginx fail?")
    assert model == "all-MiniLM-L6-v2.q8_0:abc"
    assert np.allclose(vec, np.array([1.6, 0.6]) / np.linalg.norm([1.6, 0.6]), atol=1e-6)
    other = MappedQueries(Embedder([0.6, 0.8], "bge-small:abc"), swap())
    assert (await other.embed_query("why did nginx fail?")) == ([0.6, 0.8], "bge-small:abc")


def test_the_wrapped_embedders_other_calls_go_through() -> None:
    inner = Embedder([1.0, 0.0], "all-MiniLM-L6-v2.q8_0:abc")
    MappedQueries(inner, swap()).model_refused("all-MiniLM-L6-v2.q8_0:abc")  # type: ignore[attr-defined]
    assert inner.refused == ["all-MiniLM-L6-v2.q8_0:abc"]


def test_no_file_no_map_and_a_malformed_one_is_an_error(tmp_path: Path) -> None:
    assert load_query_map(tmp_path / "absent.npz") is None
    bad = tmp_path / "bad.npz"
    np.savez(bad, matrix=np.ones((2, 3), dtype=np.float32), model=np.array("all-MiniLM-L6-v2"))
    with pytest.raises(ValueError, match="square"):
        load_query_map(bad)
    nan = tmp_path / "nan.npz"
    np.savez(nan, matrix=np.full((2, 2), np.nan, dtype=np.float32),
             model=np.array("all-MiniLM-L6-v2"))
    with pytest.raises(ValueError, match="finite"):
        load_query_map(nan)


def test_the_shipped_map_file_is_the_default_path_and_says_how_it_was_made() -> None:
    path = Settings(home=Path("/nonexistent")).query_map_path
    m = load_query_map(path)
    assert m is not None, f"the recall API ships its question map at {path}"
    assert m.model == "all-MiniLM-L6-v2" and m.matrix.shape == (384, 384)
    # Learned from the identity with a pull back towards it: a map, not noise.
    assert float(np.abs(np.diag(m.matrix)).mean()) > 0.5
    with np.load(path, allow_pickle=False) as z:
        about = json.loads(str(z["about"]))
    assert about["made by"] == "python -m eval.query_adapter build"
    assert "LoCoMo" in about["learned on"]


@pytest.mark.parametrize("on", [True, False])
async def test_the_setting_puts_the_map_between_the_question_and_the_vector_search(
        tmp_path: Path, on: bool) -> None:
    from tests.unit.recall_api.test_recall_api import FakeWorld, _client

    path = tmp_path / "swap.npz"  # the fake embedder's model, its two dimensions swapped
    np.savez(path, matrix=np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32),
             model=np.array("fake"))
    world = FakeWorld()
    client = await _client(world, query_map=on, query_map_path=path)
    try:
        r = await client.post("/memory/recall", json={"query": "why did nginx fail?"})
        assert r.status_code == 200, r.text
    finally:
        await client._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]
    assert world.search_requests, "the question was searched by vector"
    assert world.search_requests[0].vector == ([0.0, 1.0] if on else [1.0, 0.0])
    assert world.search_requests[0].model == "fake"
