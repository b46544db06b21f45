"""Folding repeated memories: the same normalised content in the same namespace and category
within a time window is one memory seen N times, not N memories (and is embedded once)."""

from __future__ import annotations

import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from totalrecall_schema import EmbeddedEvent, MemoryEvent

_NORMALISERS: list[tuple[re.Pattern[str], str]] = [
    # UUIDs
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    # ISO-8601 / RFC-3339 date-times and dates, clock times (with fractions and zones)
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
                r"(?:z|[+-]\d{2}:?\d{2})?)?\b"), "<ts>"),
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?\b"), "<time>"),
    # hex: 0x…, and hex words of ≥7 characters containing a digit (hashes, addresses, ids)
    (re.compile(r"\b0x[0-9a-f]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"), "<hex>"),
    # any remaining number: PIDs, ports, sizes, percentages, counters
    (re.compile(r"\d+(?:[.,]\d+)*"), "<n>"),
]
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lower-case text with numbers, hex, UUIDs, timestamps and PIDs replaced by placeholders."""
    out = text.lower()
    for pattern, repl in _NORMALISERS:
        out = pattern.sub(repl, out)
    return _SPACE.sub(" ", out).strip()


def content_hash(event: MemoryEvent) -> str:
    text = normalise(event.summary) + "\n" + normalise(event.detail)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


DedupKey = tuple[str, str, str]


def dedup_key(event: MemoryEvent) -> DedupKey:
    return (event.namespace, event.category, content_hash(event))


@dataclass
class Seen:
    """The memory a group of repeats folds into, as last published."""

    key: str                 # storage key of the first event (the indexer upserts it)
    first_ts: datetime       # event time of the first occurrence: the window starts here
    count: int               # repeat_count as published
    last_seen: datetime
    embedded: EmbeddedEvent  # what was published last (carries the vector)
    msg_id: str              # Nats-Msg-Id it was published with
    touched: float = 0.0     # monotonic time of the last update (for eviction)


class DedupWindow:
    """Recently published memories by (namespace, category, content hash), LRU-bounded."""

    def __init__(self, window_s: float = 300.0, max_entries: int = 20_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[DedupKey, Seen] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: DedupKey, ts: datetime) -> Seen | None:
        """The entry `ts` folds into, if any (same content, within the window of its first
        occurrence by event time, and touched within the window by wall-clock time)."""
        self._evict()
        seen = self._entries.get(key)
        if seen is None:
            return None
        if abs((ts - seen.first_ts).total_seconds()) > self.window_s:
            return None
        return seen

    def put(self, key: DedupKey, seen: Seen) -> None:
        seen.touched = self._clock()
        self._entries[key] = seen
        self._entries.move_to_end(key)
        self._evict()

    def _evict(self) -> None:
        horizon = self._clock() - self.window_s
        entries = self._entries
        while entries:
            first = next(iter(entries.values()))
            if first.touched >= horizon and len(entries) <= self.max_entries:
                break
            entries.popitem(last=False)
