"""Two hosts logging the same line are two events: the fold of exact repeats tells them apart."""

from __future__ import annotations

from totalrecall_embedder.core.dedup import content_hash, dedup_key
from totalrecall_schema import MemoryEvent


def test_two_hosts_logging_the_same_line_are_two_events_to_the_fold() -> None:
    """The embedder folds exact repeats by their text and metadata: the host is part of it."""
    a = MemoryEvent(summary="nginx failed", metadata={"host": "web-01"})
    b = MemoryEvent(summary="nginx failed", metadata={"host": "web-02"})
    again = MemoryEvent(summary="nginx failed", metadata={"host": "WEB-01"})
    assert content_hash(a) != content_hash(b) and dedup_key(a) != dedup_key(b)
    assert dedup_key(a) == dedup_key(again)  # the same host, named in another case: a repeat
