"""Session continuity: the bundle a session starts with (`POST /memory/warm`) and the summary a
finished one leaves (`POST /memory/session/end`). The text work is in core/continuity.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from totalrecall_schema import Memory, MemoryEvent

from ..core import memory_md as memory_file
from ..core.continuity import (
    SUMMARY_SUBCATEGORY,
    Turn,
    essentials,
    render_bundle,
    summarize,
    summary_id,
    turn_of,
)
from ..ports import Publisher, Store
from ..settings import Settings
from .learning import local_zone


@dataclass
class SessionContinuity:
    settings: Settings
    store: Store
    publisher: Publisher

    def memory_md(self, scope: list[str]) -> str:
        """The curated MEMORY.md (people write it) as the namespaces of `scope` may read it:
        their own sections only (`core/memory_md.py`), as `/memory/file` serves it."""
        path = self.settings.memory_dir / "MEMORY.md"
        if not path.is_file():
            return ""
        text = memory_file.shown(path.read_text(encoding="utf-8", errors="replace"), scope,
                                 self.settings.memory_md_namespace)
        limit = self.settings.warm_memory_md_max_chars
        return text if len(text) <= limit else text[:limit].rsplit("\n", 1)[0] + "\n…"

    async def bundle(self, scope: list[str], now: datetime | None = None) -> dict[str, Any]:
        """Today's and yesterday's essentials of the namespaces read, the newest session
        summary among them, MEMORY.md, and the `<session_context>` text of all three."""
        now = now or datetime.now(UTC)
        local = now.astimezone(local_zone(self.settings.patterns_timezone))
        since = (local - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        limit = self.settings.warm_essentials_max
        found, lasts = await asyncio.gather(
            asyncio.gather(*(self.store.notable(ns, since, 40 * limit) for ns in scope)),
            asyncio.gather(*(self.store.latest(ns, "conversation", SUMMARY_SUBCATEGORY)
                             for ns in scope)))
        chosen = essentials([m for ms in found for m in ms], limit)
        last = max((m for m in lasts if m is not None), key=lambda m: m.timestamp, default=None)
        memory_md = self.memory_md(scope)
        return {
            "since": since.isoformat(),
            "essentials": [{**_brief(m), "count": n} for m, n in chosen],
            "last_session": _brief(last) if last is not None else None,
            "memory_md": memory_md,
            "text": render_bundle(chosen, last, memory_md, now),
        }

    async def end(self, namespace: str, session_id: str,
                  turns: list[Turn] | None = None) -> MemoryEvent | None:
        """Summarise a finished session and store the summary (one per session: its id is
        derived from the session). `turns`: given by the caller, else the session's stored
        turns (the plugin's auto-capture and flushes). None: nothing to summarise."""
        if turns is None:
            rows = await self.store.session(namespace, session_id,
                                            self.settings.session_max_turns)
            turns = [turn_of(m) for m in rows
                     if m.category == "conversation" and m.subcategory != SUMMARY_SUBCATEGORY]
        if not turns:
            return None
        s = summarize(turns, self.settings.session_summary_sentences)
        if s is None:
            return None
        last = max(t.timestamp for t in turns)
        event = MemoryEvent(
            id=summary_id(namespace, session_id), namespace=namespace,
            # Just after the session's last turn: the newest memory of its thread.
            timestamp=last + timedelta(milliseconds=1), category="conversation",
            subcategory=SUMMARY_SUBCATEGORY, actor="system", source="session",
            summary=s.summary, detail=s.detail,
            metadata={"session": session_id, "turns": len(turns),
                      "started": min(t.timestamp for t in turns).isoformat(),
                      "commands": s.commands, "tags": ["session_summary"]})
        await self.publisher.publish([event])
        return event


def _brief(m: Memory) -> dict[str, Any]:
    return {"id": m.id, "namespace": m.namespace, "timestamp": m.timestamp.isoformat(),
            "category": m.category, "subcategory": m.subcategory, "severity": m.severity,
            "summary": m.summary, "detail": m.detail}
