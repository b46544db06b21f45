"""Normalisation and the dedup window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from totalrecall_embedder.core.dedup import (
    DedupWindow,
    Seen,
    TemplateVector,
    TemplateVectors,
    content_hash,
    event_template,
)
from totalrecall_schema import EmbeddedEvent, MemoryEvent
from totalrecall_schema.templates import exact_form, template_form

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("a", "b"), [
    ("at 2026-05-01T12:00:01.123Z disk full", "at 2026-05-02 08:13:14 disk full"),
    ("took 12:01:02.5 to finish", "took 0:00:03 to finish"),
    ("Swap at 94%  on   host", "Swap at 94% on host"),
])
def test_only_timestamps_and_spacing_are_volatile(a: str, b: str) -> None:
    assert exact_form(a) == exact_form(b)


@pytest.mark.parametrize(("a", "b"), [
    ("sshd[1234]: session opened", "sshd[98765]: session opened"),
    ("segfault at 0x7ffd1234 in libc", "segfault at 0xdeadbeef in libc"),
    ("commit 3f9a1c2e broke the build", "commit 9be01d7 broke the build"),
    ("request 123e4567-e89b-12d3-a456-426614174000 failed",
     "request 00000000-0000-0000-0000-000000000001 failed"),
    ("PacketResponder 1 for block blk_38865049064139660 terminating",
     "PacketResponder 1 for block blk_-6952295868487656571 terminating"),
    ("Failed password for root from 10.0.0.1 port 22", "Failed password for root from 10.0.0.2 port 22"),
    ("Swap at 94% on host", "Swap at 12.5% on host"),
])
def test_identifiers_tell_events_apart_but_share_a_template(a: str, b: str) -> None:
    assert exact_form(a) != exact_form(b)
    assert template_form(a) == template_form(b)


@pytest.mark.parametrize(("a", "b"), [
    ("nginx failed to start", "postgres failed to start"),
    ("deadbeef cafe", "facade cafe"),  # hex-looking words without digits are words
])
def test_different_content_has_different_templates(a: str, b: str) -> None:
    assert template_form(a) != template_form(b)


def test_content_hash_covers_summary_detail_and_metadata() -> None:
    e1 = MemoryEvent(summary="OOM killed pid 42", detail="at 2026-05-01T12:00:00Z rss 1.2 GB")
    e2 = MemoryEvent(summary="OOM killed pid 42", detail="at 2026-05-01T12:03:00Z rss 1.2 GB")
    e3 = MemoryEvent(summary="OOM killed pid 43", detail="at 2026-05-01T12:00:00Z rss 1.2 GB")
    e4 = MemoryEvent(summary="OOM killed pid 42", detail="at 2026-05-01T12:00:00Z rss 1.2 GB",
                     metadata={"service": "chrome"})
    assert content_hash(e1) == content_hash(e2)
    assert len({content_hash(e1), content_hash(e3), content_hash(e4)}) == 3
    assert event_template(e1) == event_template(e3)


def test_template_vectors_are_per_model_and_lru_bounded() -> None:
    t = TemplateVectors(max_entries=2)
    t.put("a", TemplateVector("m:1", [1.0]))
    assert t.get("a", "m:1") is not None and t.get("a", "m:2") is None and t.get("a", None) is None
    t.put("b", TemplateVector("m:1", [2.0]))
    t.get("a", "m:1")  # touched: b is now the least recently used
    t.put("c", TemplateVector("m:1", [3.0]))
    assert len(t) == 2 and t.get("b", "m:1") is None and t.get("a", "m:1") is not None


def _seen(ts: datetime) -> Seen:
    ev = MemoryEvent(id="x", summary="s", timestamp=ts)
    return Seen(key=ev.key, first_ts=ts, count=1, last_seen=ts,
                embedded=EmbeddedEvent(event=ev, vector=[1.0]), msg_id=ev.key)


def test_window_matches_by_event_time_and_expires_by_clock() -> None:
    now = [1000.0]
    w = DedupWindow(window_s=300, max_entries=10, clock=lambda: now[0])
    key = ("default", "error", "h")
    w.put(key, _seen(T0))
    assert w.get(key, T0 + timedelta(seconds=299)) is not None
    assert w.get(key, T0 + timedelta(seconds=301)) is None  # outside the event-time window
    assert w.get(key, T0 - timedelta(seconds=10)) is not None  # out of order is fine
    now[0] += 301
    assert w.get(key, T0) is None and len(w) == 0  # not touched for a window: evicted


def test_window_is_lru_bounded() -> None:
    w = DedupWindow(window_s=300, max_entries=2, clock=lambda: 0.0)
    for i in range(3):
        w.put(("d", "c", str(i)), _seen(T0))
    assert len(w) == 2
    assert w.get(("d", "c", "0"), T0) is None
    assert w.get(("d", "c", "2"), T0) is not None
