"""Message handling with fakes (no network): ack after writes, DLQ for bad payloads, nak with
delay when a store is down, a poison message isolated from its batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from totalrecall_indexer.core.indexer import StoreUnavailable
from totalrecall_indexer.handlers import handle_admin, handle_embedded_batch, handle_search
from totalrecall_indexer.metrics import Metrics
from totalrecall_schema import (
    AdminReply,
    AdminRequest,
    DeadLetter,
    EmbeddedEvent,
    MemoryEvent,
    VectorSearchReply,
    VectorSearchRequest,
)


@dataclass
class FakeMsg:
    data: bytes
    subject: str = "t.embedded.error"
    acked: bool = False
    naked: float | None = None

    async def ack(self) -> None:
        self.acked = True

    async def nak(self, delay: float | None = None) -> None:
        self.naked = delay if delay is not None else 0.0


@dataclass
class FakeIndexer:
    fail: Exception | None = None
    poison: str | None = None
    batches: list[list[str]] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)
    admin_calls: list[str] = field(default_factory=list)

    async def index_batch(self, events: Sequence[EmbeddedEvent]) -> None:
        if self.fail is not None:
            raise self.fail
        if self.poison and any(e.event.id == self.poison for e in events):
            raise RuntimeError("boom")
        self.batches.append([e.event.id for e in events])

    async def search(self, req: VectorSearchRequest) -> VectorSearchReply:
        return VectorSearchReply(took_ms={"hot": 1.0})

    async def admin(self, req: AdminRequest, embed: object) -> AdminReply:
        self.admin_calls.append(req.verb)
        return AdminReply(result={"verb": req.verb})


def _msg(i: int) -> FakeMsg:
    ev = EmbeddedEvent(event=MemoryEvent(id=f"e{i}", summary=f"s{i}"), vector=[0.1, 0.2])
    return FakeMsg(ev.model_dump_json().encode())


class DLQ:
    def __init__(self, fail: bool = False) -> None:
        self.letters: list[DeadLetter] = []
        self.fail = fail

    async def __call__(self, dl: DeadLetter) -> None:
        if self.fail:
            raise ConnectionError("nats down")
        self.letters.append(dl)


async def test_valid_batch_written_then_acked() -> None:
    idx, dlq = FakeIndexer(), DLQ()
    msgs = [_msg(i) for i in range(3)]
    out = await handle_embedded_batch(msgs, idx, dlq, 2.0)  # type: ignore[arg-type]
    assert out == {"indexed": 3, "dead": 0, "retry": 0}
    assert idx.batches == [["e0", "e1", "e2"]] and all(m.acked for m in msgs)


async def test_invalid_payloads_go_to_dlq_and_are_acked() -> None:
    idx, dlq = FakeIndexer(), DLQ()
    bad = [FakeMsg(b"{nope"), FakeMsg(b'{"event": {"summary": "x"}, "vector": [1], "dim": 3}'),
           FakeMsg(b"\xff\xfe")]
    msgs = [*bad, _msg(1)]
    out = await handle_embedded_batch(msgs, idx, dlq, 2.0)  # type: ignore[arg-type]
    assert out["dead"] == 3 and out["indexed"] == 1
    assert all(m.acked for m in msgs)
    assert dlq.letters[0].payload == "{nope"
    assert all(d.stage == "indexer" and d.subject == "t.embedded.error" for d in dlq.letters)


async def test_store_down_naks_with_delay_and_never_dlqs() -> None:
    idx, dlq = FakeIndexer(fail=StoreUnavailable("postgres down")), DLQ()
    msgs = [_msg(i) for i in range(2)]
    out = await handle_embedded_batch(msgs, idx, dlq, 5.0)  # type: ignore[arg-type]
    assert out == {"indexed": 0, "dead": 0, "retry": 2}
    assert all(m.naked == 5.0 and not m.acked for m in msgs) and dlq.letters == []


async def test_poison_event_is_isolated() -> None:
    idx, dlq = FakeIndexer(poison="e1"), DLQ()
    msgs = [_msg(i) for i in range(3)]
    out = await handle_embedded_batch(msgs, idx, dlq, 1.0)  # type: ignore[arg-type]
    assert out == {"indexed": 2, "dead": 1, "retry": 0}
    assert idx.batches == [["e0"], ["e2"]]
    assert all(m.acked for m in msgs) and "boom" in dlq.letters[0].reason


async def test_dlq_unavailable_leaves_message_for_redelivery() -> None:
    idx, dlq = FakeIndexer(), DLQ(fail=True)
    m = FakeMsg(b"garbage")
    await handle_embedded_batch([m], idx, dlq, 3.0)  # type: ignore[arg-type, list-item]
    assert not m.acked and m.naked == 3.0


async def test_rpc_handlers_answer_errors_instead_of_raising() -> None:
    idx = FakeIndexer()
    rep = await handle_search(b"{bad", idx)  # type: ignore[arg-type]
    assert rep.error and "VectorSearchRequest" in rep.error
    rep = await handle_search(VectorSearchRequest(vector=[1.0]).model_dump_json().encode(),
                              idx)  # type: ignore[arg-type]
    assert rep.error is None and rep.took_ms == {"hot": 1.0}
    arep = await handle_admin(b'{"verb": "explode"}', idx, None)  # type: ignore[arg-type]
    assert not arep.ok and arep.error
    arep = await handle_admin(b'{"verb": "stats"}', idx, None)  # type: ignore[arg-type]
    assert arep.ok and arep.result == {"verb": "stats"}


def test_postgres_errors_caused_by_the_data_are_told_from_outages() -> None:
    """Data errors isolate the event that causes them (dead letter); anything else is an
    outage (redelivery). A value too big for an index entry is the data's fault."""
    import asyncpg
    from totalrecall_indexer.adapters.pgstore import is_data_error

    too_big = asyncpg.exceptions.ProgramLimitExceededError("index row size 3520 exceeds maximum")
    assert too_big.sqlstate == "54000" and is_data_error(too_big)
    assert is_data_error(asyncpg.exceptions.CharacterNotInRepertoireError("bad utf8"))
    assert is_data_error(asyncpg.exceptions.UniqueViolationError("dup"))
    assert not is_data_error(asyncpg.exceptions.CannotConnectNowError("starting up"))
    assert not is_data_error(ConnectionResetError())


async def test_a_standby_does_no_admin_verb_and_an_owner_names_its_partitions() -> None:
    """One writer per partition: an indexer holding no lease (a standby) changes nothing, and
    answers for no partition so the caller waits for the owners."""
    idx = FakeIndexer()
    standby = await handle_admin(b'{"verb": "forget", "keys": ["k"]}', idx, None,
                                 held=[])  # type: ignore[arg-type]
    assert standby.ok and standby.partitions == [] and idx.admin_calls == []
    owner = await handle_admin(b'{"verb": "stats"}', idx, None, held=[0, 2])  # type: ignore[arg-type]
    assert owner.partitions == [0, 2] and idx.admin_calls == ["stats"]
    single = await handle_admin(b'{"verb": "stats"}', idx, None)  # type: ignore[arg-type]
    assert single.partitions is None
