"""Ingest yields to recall (`core/pacing.py`): a pause after each batch while searches are being
answered, none otherwise, and the indexer's consumer wired to it (no network)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from totalrecall_indexer.bootstrap import build
from totalrecall_indexer.core.pacing import IngestPacer
from totalrecall_indexer.lifecycle import Lifecycle
from totalrecall_indexer.metrics import Metrics
from totalrecall_indexer.settings import Settings
from totalrecall_schema import (
    EmbeddedEvent,
    MemoryEvent,
    VectorSearchReply,
    VectorSearchRequest,
)


def test_no_pause_while_no_recall_is_served() -> None:
    pacer = IngestPacer(duty=0.5, active_s=2.0)
    assert pacer.pause_after(0.3, now=100.0) == 0.0


def test_a_batch_is_followed_by_the_pause_its_duty_leaves() -> None:
    pacer = IngestPacer(duty=0.5, active_s=2.0, max_pause_s=5.0)
    pacer.searched(100.0)
    assert pacer.pause_after(0.3, now=100.5) == pytest.approx(0.3)  # half the wall time
    quarter = IngestPacer(duty=0.25, active_s=2.0, max_pause_s=5.0)
    quarter.searched(100.0)
    assert quarter.pause_after(0.2, now=100.5) == pytest.approx(0.6)


def test_the_pause_is_bounded() -> None:
    """A batch that waited seconds on an HNSW build did little work meanwhile."""
    pacer = IngestPacer(duty=0.5, active_s=2.0, max_pause_s=0.5)
    pacer.searched(100.0)
    assert pacer.pause_after(4.0, now=100.1) == 0.5


def test_full_speed_again_once_searches_stop() -> None:
    pacer = IngestPacer(duty=0.5, active_s=2.0)
    pacer.searched(100.0)
    assert pacer.pause_after(0.2, now=101.9) > 0
    assert pacer.pause_after(0.2, now=102.1) == 0.0


def test_duty_one_never_pauses() -> None:
    pacer = IngestPacer(duty=1.0)
    pacer.searched(100.0)
    assert pacer.pause_after(0.3, now=100.0) == 0.0


@pytest.mark.parametrize("duty", [0.0, -0.5, 1.5])
def test_a_duty_outside_zero_to_one_is_refused(duty: float) -> None:
    with pytest.raises(ValueError, match="duty"):
        IngestPacer(duty=duty)


@dataclass
class _SlowIndexer:
    """Writes take `write_s` (the wall time a batch takes)."""

    write_s: float = 0.05
    batches: list[list[str]] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)

    async def index_batch(self, events: Sequence[EmbeddedEvent]) -> None:
        await asyncio.sleep(self.write_s)
        self.batches.append([e.event.id for e in events])

    async def search(self, req: VectorSearchRequest) -> VectorSearchReply:
        return VectorSearchReply(took_ms={"hot": 1.0})


@dataclass
class _Msg:
    data: bytes
    subject: str = "t.embedded.error"
    acked: bool = False

    async def ack(self) -> None:
        self.acked = True

    async def nak(self, delay: float | None = None) -> None:
        raise AssertionError("not expected")


def _msgs(n: int) -> list[_Msg]:
    return [_Msg(EmbeddedEvent(event=MemoryEvent(id=f"e{i}", summary=f"s{i}"),
                               vector=[0.1, 0.2]).model_dump_json().encode()) for i in range(n)]


def _paused(life: Lifecycle) -> float:
    return float(life.c.metrics.registry.get_sample_value(
        "totalrecall_indexer_ingest_paused_seconds_total") or 0.0)


async def test_the_consumer_pauses_after_a_batch_only_while_searches_are_answered() -> None:
    fake = _SlowIndexer()
    c = build(Settings(ingest_duty=0.5), indexer=fake)  # type: ignore[arg-type]
    life = Lifecycle(c)
    first: list[Any] = _msgs(3)
    await life.on_embedded(first)
    assert all(m.acked for m in first) and _paused(life) == 0.0  # no recall: full speed

    req = VectorSearchRequest(vector=[0.1, 0.2], topk=5)
    await life.answer_search(req.model_dump_json().encode())
    second: list[Any] = _msgs(3)
    await life.on_embedded(second)
    assert all(m.acked for m in second)
    # duty 0.5: a pause as long as the batch took (its write, at least), within the bound
    assert fake.write_s <= _paused(life) <= c.pacer.max_pause_s
    assert fake.batches == [["e0", "e1", "e2"]] * 2


async def test_duty_one_turns_pacing_off() -> None:
    c = build(Settings(ingest_duty=1.0), indexer=_SlowIndexer())  # type: ignore[arg-type]
    life = Lifecycle(c)
    await life.answer_search(VectorSearchRequest(vector=[0.1, 0.2], topk=5)
                             .model_dump_json().encode())
    await life.on_embedded(_msgs(2))  # type: ignore[arg-type]
    assert _paused(life) == 0.0
