"""Ingest while a tier's HNSW builds (core/deferred_writes.py), in-process with real zvec and a
build held open: the batch's Markdown and Postgres rows are written at once, its Zvec documents
wait (unacked) and are written when the build ended, in order; forgotten keys and vectors for
re-created collections are not written; shutdown fails what still waits."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from totalrecall_indexer.core.indexer import Indexer, StoreUnavailable
from totalrecall_indexer.metrics import Metrics
from totalrecall_indexer.stores.markdown_log import MarkdownLog
from totalrecall_indexer.stores.zvec_tiers import ZvecTiers
from totalrecall_schema import EmbeddedEvent, MemoryEvent
from totalrecall_schema.events import memory_key

DIM = 384


def _vec(seed: int) -> list[float]:
    v = np.random.default_rng(seed).normal(size=DIM)
    return [float(x) for x in v / np.linalg.norm(v)]


def _event(i: int, summary: str | None = None) -> EmbeddedEvent:
    return EmbeddedEvent(
        event=MemoryEvent(id=f"e{i}", summary=summary or f"memory {i}",
                          timestamp=datetime.now(UTC) - timedelta(minutes=1)),
        vector=_vec(i), model="m")


class _Pg:
    def __init__(self) -> None:
        self.keys: list[str] = []

    async def upsert(self, rows: Any) -> None:
        self.keys += [r.rec.key for r in rows]

    async def count(self) -> int:
        return len(self.keys)


class _HeldBuild:
    """A collection whose `optimize()` waits for `release` (the real build runs after)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.started, self.release = threading.Event(), threading.Event()

    def optimize(self) -> None:
        self.started.set()
        assert self.release.wait(30)
        self.real.optimize()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.fixture
async def idx(tmp_path: Path) -> AsyncIterator[Indexer]:
    tiers = ZvecTiers(tmp_path / "zvec")
    await asyncio.to_thread(tiers.open)
    indexer = Indexer(markdown=MarkdownLog(tmp_path / "memory"), pg=_Pg(),  # type: ignore[arg-type]
                      tiers=tiers, metrics=Metrics())
    await indexer.index_batch([_event(i) for i in range(20)])  # the hot tier has docs to build
    yield indexer
    if isinstance(tiers.cols["hot"], _HeldBuild):  # a test failed while it held the build
        tiers.cols["hot"].release.set()
        await asyncio.sleep(0.5)
    await asyncio.to_thread(tiers.close)


async def _start_build(idx: Indexer) -> tuple[_HeldBuild, asyncio.Task[dict[str, float]]]:
    held = _HeldBuild(idx.tiers.cols["hot"])
    idx.tiers.cols["hot"] = held
    build = asyncio.ensure_future(idx.optimize_once(force=True))
    assert await asyncio.to_thread(held.started.wait, 10), "the build did not start"
    return held, build


async def _end_build(idx: Indexer, held: _HeldBuild, build: asyncio.Task[Any]) -> None:
    held.release.set()
    assert "hot" in await asyncio.wait_for(build, 30)
    idx.tiers.cols["hot"] = held.real


def _in_zvec(idx: Indexer, *ids: str) -> set[str]:
    keys = {memory_key("default", i): i for i in ids}
    return {keys[k] for k in idx.tiers.present("hot", list(keys))}


async def test_ingest_goes_on_while_the_tier_builds_and_zvec_follows_its_end(
        idx: Indexer) -> None:
    held, build = await _start_build(idx)
    first = await asyncio.wait_for(idx.index_batch([_event(100), _event(101)], defer=True), 10)
    second = await asyncio.wait_for(
        idx.index_batch([_event(101, "memory 101, again")], defer=True), 10)
    pg: _Pg = idx.pg  # type: ignore[assignment]
    # Postgres has them already.
    assert {memory_key("default", "e100"), memory_key("default", "e101")} <= set(pg.keys)
    logged = "".join(p.read_text() for p in idx.markdown.daily_dir.glob("*.md"))
    assert "memory 100" in logged and "`e101`" in logged  # the daily log too
    assert first.zvec_pending is not None and second.zvec_pending is not None
    assert not first.zvec_pending.done()  # (reads of the tier wait for its build)
    assert idx.metrics.deferred_docs._value.get() == 3

    await _end_build(idx, held, build)
    await asyncio.wait_for(asyncio.gather(first.zvec_pending, second.zvec_pending), 10)
    assert _in_zvec(idx, "e100", "e101") == {"e100", "e101"}
    key = memory_key("default", "e101")
    assert idx.tiers.fetch("hot", [key])[key].summary == "memory 101, again"  # the later write won
    assert idx.metrics.deferred_docs._value.get() == 0
    # After the build, writes go straight to the tier again.
    after = await idx.index_batch([_event(102)], defer=True)
    assert after.zvec_pending is None and _in_zvec(idx, "e102") == {"e102"}


async def test_without_defer_a_write_still_waits_for_the_build(idx: Indexer) -> None:
    held, build = await _start_build(idx)
    rebuild_like = asyncio.ensure_future(idx.index_batch([_event(200)]))
    done, _ = await asyncio.wait({rebuild_like}, timeout=0.3)
    assert not done, "a write ran during the tier's build"
    await _end_build(idx, held, build)
    res = await asyncio.wait_for(rebuild_like, 10)
    assert res.zvec_pending is None and _in_zvec(idx, "e200") == {"e200"}


async def test_a_key_forgotten_meanwhile_is_not_written_after_the_build(idx: Indexer) -> None:
    held, build = await _start_build(idx)
    res = await idx.index_batch([_event(300), _event(301)], defer=True)
    idx.forgotten = {memory_key("default", "e300")}  # what `forget` records first, under the write lock
    await _end_build(idx, held, build)
    assert res.zvec_pending is not None
    await asyncio.wait_for(res.zvec_pending, 10)
    assert _in_zvec(idx, "e300", "e301") == {"e301"}


async def test_vectors_for_collections_recreated_meanwhile_are_redelivered(
        idx: Indexer) -> None:
    held, build = await _start_build(idx)
    res = await idx.index_batch([_event(400)], defer=True)
    idx.state.generation += 1  # what `CollectionGate.reset_tiers` does
    await _end_build(idx, held, build)
    assert res.zvec_pending is not None
    with pytest.raises(StoreUnavailable, match="re-created"):
        await asyncio.wait_for(res.zvec_pending, 10)
    assert _in_zvec(idx, "e400") == set()


async def test_shutdown_fails_what_still_waits_for_a_build(idx: Indexer) -> None:
    held, build = await _start_build(idx)
    res = await idx.index_batch([_event(500)], defer=True)
    idx.deferred.abandon()
    assert res.zvec_pending is not None
    with pytest.raises(StoreUnavailable, match="stopped"):
        await asyncio.wait_for(res.zvec_pending, 10)
    await _end_build(idx, held, build)
    assert idx.metrics.deferred_docs._value.get() == 0
