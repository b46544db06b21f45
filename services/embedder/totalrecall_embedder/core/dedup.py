"""Folding exact repeats, sharing embeddings between events of one template.

An event whose text and metadata equal an earlier one's but for timestamps (the same
namespace and category, within a time window) is that memory seen N times: it is folded into it
(`repeat_count`, `last_seen`). An event that differs in anything else — a block id, an IP, a
port, a PID — is a memory of its own, however alike: only its embedding may be reused from an
earlier event of the same template (`TemplateVectors`), which saves the model's work and loses
nothing (the text, and so every identifier, is stored with each event).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from totalrecall_schema import EmbeddedEvent, MemoryEvent
from totalrecall_schema.templates import exact_form, exact_hash, template_hash

#: Metadata that changes between two reports of the same thing.
_VOLATILE_METADATA = frozenset({"duration_ms"})


def content_hash(event: MemoryEvent) -> str:
    """Equal for events that differ only in timestamps (in text or metadata) and spacing."""
    meta = {k: v for k, v in event.metadata.model_dump(mode="json", exclude_none=True).items()
            if k not in _VOLATILE_METADATA}
    return exact_hash(event.summary, event.detail + "\n" +
                      exact_form(json.dumps(meta, sort_keys=True, default=str)))


def event_template(event: MemoryEvent) -> str:
    """The template of an event's embedded text: events sharing it may share a vector."""
    return template_hash(event.summary, event.detail)


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


@dataclass
class TemplateVector:
    model: str
    vector: list[float]


class TemplateVectors:
    """The last vector computed for each event template, LRU-bounded (in memory: after a
    restart a template is embedded once more)."""

    def __init__(self, max_entries: int = 20_000) -> None:
        self.max_entries = max(1, max_entries)
        self._entries: OrderedDict[str, TemplateVector] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, template: str, model: str | None) -> TemplateVector | None:
        """The vector of `template` made by `model` (None for another model or none)."""
        found = self._entries.get(template)
        if found is None or model is None or found.model != model:
            return None
        self._entries.move_to_end(template)
        return found

    def put(self, template: str, entry: TemplateVector) -> None:
        self._entries[template] = entry
        self._entries.move_to_end(template)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
