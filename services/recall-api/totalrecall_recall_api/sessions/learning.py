"""The user-pattern refresh: read a namespace's recent memories, learn (core/patterns.py), and
store what was learned as `user_pattern` memories through the normal pipeline (so the
`<user_profile>` of every recall shows them, and the Markdown log keeps them).

A pattern's id is derived from its subject and text: learning the same again is a no-op, a
changed pattern is a new memory whose subject supersedes the old one (the indexer marks it).
Its timestamp is its newest evidence, so that a preference the user states later (a newer
memory of the same subject) wins over what was learned before it, and learning about that
subject resumes from the statement.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from totalrecall_schema import Memory, MemoryEvent

from ..core.patterns import Options, Pattern, learn
from ..core.supersede import superseded
from ..ports import Publisher, Store
from ..settings import Settings

log = logging.getLogger("totalrecall.patterns")

#: the categories the learners read (activity, tools, tasks)
SOURCES = ("conversation", "security", "system.process")


def local_zone(name: str) -> tzinfo:
    """The user's zone: an IANA name, or (empty) this machine's."""
    if not name:
        return datetime.now().astimezone().tzinfo or UTC
    return ZoneInfo(name)


@dataclass
class PatternLearner:
    settings: Settings
    store: Store
    publisher: Publisher

    @property
    def options(self) -> Options:
        s = self.settings
        return Options(min_observations=s.patterns_min_observations,
                       min_confidence=s.patterns_min_confidence,
                       active_share=s.patterns_active_share,
                       max_evidence=s.patterns_max_evidence)

    async def refresh(self, namespace: str, now: datetime | None = None) -> list[MemoryEvent]:
        """Learn the namespace's patterns now; returns the pattern memories stored (new or
        changed ones only)."""
        s = self.settings
        now = now or datetime.now(UTC)
        rows, current = await asyncio.gather(
            self.store.recent(namespace, now - timedelta(days=s.patterns_window_days), None,
                              s.patterns_max_memories, SOURCES),
            self.store.current_facts(namespace, 1000))
        current = [m for m in current if not superseded(m)]
        # A preference stated (not learned) is the newest word on its subject: what was seen
        # before it no longer counts for that subject.
        stated = {str(m.metadata["subject"]): m.timestamp for m in current
                  if m.metadata.get("subject") and not m.metadata.get("learned")}
        patterns = learn(rows, self.options, local_zone(s.patterns_timezone), stated)
        have = {m.id: m for m in current}
        events = [self._event(namespace, p) for p in patterns
                  if not self._known(have.get(p.event_id(namespace)), p)
                  and not self._older_than_stated(p, stated)]
        if events:
            # JetStream drops a message id it saw in the last 10 minutes: such a pattern (the
            # same id again, e.g. with one more observation) is not stored now, and not reported.
            duplicate = await self.publisher.publish(events)
            events = [e for e, dup in zip(events, duplicate, strict=True) if not dup]
        log.info("patterns of %s: %d learned, %d stored", namespace, len(patterns), len(events))
        return events

    @staticmethod
    def _known(m: Memory | None, p: Pattern) -> bool:
        """Stored already with the same evidence: nothing to update."""
        return m is not None and m.metadata.get("observations") == p.observations \
            and m.timestamp == p.last_seen

    @staticmethod
    def _older_than_stated(p: Pattern, stated: dict[str, datetime]) -> bool:
        when = stated.get(p.subject)
        return when is not None and p.last_seen is not None and p.last_seen <= when

    @staticmethod
    def _event(namespace: str, p: Pattern) -> MemoryEvent:
        metadata: dict[str, Any] = {
            "subject": p.subject, "confidence": p.confidence, "observations": p.observations,
            "evidence": p.evidence, "learned": True, "tags": ["learned", p.kind],
            "first_seen": p.first_seen.isoformat() if p.first_seen else None,
        }
        return MemoryEvent(id=p.event_id(namespace), namespace=namespace,
                           timestamp=p.last_seen or datetime.now(UTC), category="user_pattern",
                           subcategory=p.kind, actor="system", source="patterns",
                           summary=p.summary, detail=p.detail, metadata=metadata)

    async def namespaces(self) -> list[str]:
        return list(self.settings.patterns_namespaces) or await self.store.namespaces()

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh every namespace every `patterns_detection_interval_s` (the design's
        `patterns.detectionInterval`), first after `patterns_first_delay_s`."""
        s = self.settings
        delay = s.patterns_first_delay_s
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay)
                return
            except TimeoutError:
                pass
            delay = s.patterns_detection_interval_s
            try:
                for ns in await self.namespaces():
                    await self.refresh(ns)
            except Exception as exc:  # the next round tries again; recall never depends on it
                log.warning("pattern refresh failed: %s: %s", type(exc).__name__, exc)
