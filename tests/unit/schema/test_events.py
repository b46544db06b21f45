from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from totalrecall_schema import EmbeddedEvent, MemoryEvent, RecallRequest, Topology, memory_key
from totalrecall_schema.events import MAX_SUMMARY_CHARS, MAX_TAG_CHARS


def test_defaults_and_key_are_stable() -> None:
    e = MemoryEvent(summary="nginx restarted", category="system.service", id="abc")
    assert e.namespace == "default"
    assert e.key == memory_key("default", "abc")
    assert e.key != memory_key("other", "abc")
    assert e.timestamp.tzinfo is not None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"summary": ""}, "at least 1 character"),
        ({"summary": "   "}, "must not be blank"),
        ({"summary": "x", "category": "nope"}, "unknown category"),
        ({"summary": "x", "namespace": "bad space"}, "String should match pattern"),
        ({"summary": "x", "timestamp": datetime.now(UTC) + timedelta(days=3)}, "future"),
        ({"summary": "x", "detail": "d" * 40_000}, "at most 32000"),
        ({"summary": "x", "metadata": {"tags": ["t"] * 40}}, "at most 32 tags"),
        ({"summary": "x", "surprise": 1}, "Extra inputs are not permitted"),
    ],
)
def test_validation_messages_are_clear(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        MemoryEvent(**fields)
    assert message in str(err.value)


def test_naive_timestamp_is_utc() -> None:
    e = MemoryEvent(summary="x", timestamp=datetime(2024, 5, 1, 12, 0))
    assert e.timestamp == datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def test_json_round_trip() -> None:
    e = MemoryEvent(summary="s", detail="d", category="diagnosis",
                    metadata={"severity": "error", "tags": ["a"], "custom": {"x": 1}})
    again = MemoryEvent.model_validate_json(e.model_dump_json())
    assert again == e
    emb = EmbeddedEvent(event=e, vector=[0.0, 1.0], model="m")
    assert EmbeddedEvent.model_validate_json(emb.model_dump_json()).dim == 2


def test_recall_request_accepts_contract_alias() -> None:
    r = RecallRequest.model_validate({"query": "q", "maxResults": 3})
    assert r.max_results == 3
    with pytest.raises(ValidationError):
        RecallRequest.model_validate({"query": "q", "timeframe": "2w"})


def test_topologies_are_isolated() -> None:
    a, b = Topology.for_test("one"), Topology.for_test("two")
    assert a.events_stream != b.events_stream
    assert a.events_subject("error") == "tone.events.error"
    assert Topology().events_subject("system.process") == "memory.events.system.process"


def test_scrubbing_that_grows_a_field_past_its_limit_still_validates_downstream() -> None:
    # "[REDACTED]" is longer than "abc123": scrubbing lengthens a summary that was at the limit.
    summary = (("x " * 900) + "password=abc123 " * 12)[:MAX_SUMMARY_CHARS]
    ev = MemoryEvent(summary=summary, category="system.process",
                     metadata={"tags": ["password=abc" + "x" * 48]})
    assert "abc123" not in ev.summary and len(ev.summary) <= MAX_SUMMARY_CHARS
    assert all(len(t) <= MAX_TAG_CHARS for t in ev.metadata.tags)
    # the embedder and the indexer parse it again: it must not become a dead letter
    assert MemoryEvent.model_validate_json(ev.model_dump_json()) == ev


def test_nul_characters_are_dropped_everywhere() -> None:
    """Postgres cannot store U+0000: a NUL from a log line or a request must not reach it."""
    e = MemoryEvent.model_validate_json(
        '{"summary": "disk\\u0000 full", "detail": "\\u0000", "actor": "a\\u0000b",'
        ' "metadata": {"k\\u0000": ["v\\u0000"], "tags": ["t\\u0000"]}}')
    assert (e.summary, e.detail, e.actor) == ("disk full", "", "ab")
    assert e.metadata.model_extra == {"k": ["v"]} and e.metadata.tags == ["t"]
    with pytest.raises(ValueError, match="at least 1 character"):
        MemoryEvent(summary="\x00")


def test_dead_letters_carry_no_secret() -> None:
    from totalrecall_schema import DeadLetter

    raw = '{"summary": 5, "detail": "DB_PASSWORD=hunter2x9 AKIAABCDEFGHIJKLMNOP"}'
    dl = DeadLetter(stage="embedder", subject="memory.events.x", payload=raw,
                    reason=f"invalid MemoryEvent: input_value={raw}")
    assert "hunter2x9" not in dl.model_dump_json() and "AKIAABCDEFGHIJKLMNOP" not in dl.reason
