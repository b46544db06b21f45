"""MEMORY.md sync: the user's curated memories, indexed pinned to the hot tier. The file is the
truth: new or changed entries are upserted, entries gone from it are removed from the indexes.
(The parser is `totalrecall_schema.memory_md`; this room decides what to write.)"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from totalrecall_schema import EmbeddedEvent, EventMetadata, MemoryEvent
from totalrecall_schema.memory_md import SOURCE as MEMORY_MD_SOURCE
from totalrecall_schema.memory_md import Entry, parse_memory_md

from .embed import EmbedFn, embed_all
from .forget import Forgetting
from .ingest import IngestWriter
from .state import IndexState

log = logging.getLogger("totalrecall.indexer")


def entry_event(e: Entry, ts: datetime) -> MemoryEvent:
    tags = ["memory.md", *dict.fromkeys(t[:64] for t in e.section if t.strip())][:32]
    return MemoryEvent(
        id=e.id, timestamp=ts, namespace=e.namespace, category=e.category,
        subcategory=e.subcategory, actor="user", source=MEMORY_MD_SOURCE,
        summary=e.summary, detail=e.detail[:32_000],
        metadata=EventMetadata(tags=tags, section=" › ".join(e.section)))


def is_stale(ev: MemoryEvent, row: dict[str, Any] | None, index_model: str | None) -> bool:
    """Must this entry be (re)written: new, changed, or still without a vector of the index's
    model?"""
    if row is None or not row["embedded"]:
        return True
    if index_model is not None and row["model"] != index_model:
        return True
    return (row["category"], row["subcategory"], row["summary"], row["detail"],
            list(row["tags"] or [])) != (ev.category, ev.subcategory, ev.summary, ev.detail,
                                         ev.metadata.tags)


class MemoryMdSync:
    def __init__(self, state: IndexState, writer: IngestWriter, forgetting: Forgetting) -> None:
        self.state = state
        self.writer = writer
        self.forgetting = forgetting
        self.status: dict[str, Any] = {"entries": 0, "unembedded": 0, "synced_at": None}
        #: (mtime, size) of the file at the last sync: None when it did not exist (or never).
        self.synced_sig: tuple[int, int] | None = None
        self._retry_at: float | None = None
        self._lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        return self.state.markdown.memory_md_path

    def due(self) -> bool:
        """Has MEMORY.md changed (mtime/size) since the last sync, or is a retry due?"""
        if self.state.markdown.memory_md_signature() != self.synced_sig:
            return True
        return self._retry_at is not None and time.monotonic() >= self._retry_at

    async def sync(self, embed: EmbedFn | None, force: bool = False) -> dict[str, Any] | None:
        """Index MEMORY.md: upsert new or changed entries (pinned to the hot tier, embedded via
        `embed`), remove the ones no longer in the file. None when nothing changed."""
        st = self.state
        async with self._lock:
            if not force and not self.due():
                return None
            sig, text = await asyncio.to_thread(st.markdown.read_memory_md)
            now = datetime.now(UTC)
            entries: list[tuple[Entry, MemoryEvent]] = []
            for e in parse_memory_md(text, st.cfg.memory_md_namespace):
                if e.key in st.forgotten:  # forgotten stays forgotten, even from MEMORY.md
                    continue
                try:
                    entries.append((e, entry_event(e, now)))
                except ValueError as exc:  # e.g. metadata over the size limit
                    log.warning("MEMORY.md line %d skipped: %s", e.line, exc)
            existing = await st.pg.source_rows(MEMORY_MD_SOURCE)
            want = {e.key for e, _ev in entries}
            gone = [k for k in existing if k not in want]
            stale = [(e, ev) for e, ev in entries
                     if is_stale(ev, existing.get(e.key), st.tiers.model)]
            vectors, model = await embed_all([ev.embedding_text() for _e, ev in stale], embed,
                                             st.cfg.embed_batch)
            events: list[EmbeddedEvent] = []
            for (e, ev), vec in zip(stale, vectors, strict=True):
                old = existing.get(e.key)
                if old is not None:  # keep when it was first indexed
                    ev = ev.model_copy(update={"timestamp": old["ts"]})
                events.append(EmbeddedEvent(event=ev, vector=vec,
                                            model=model if vec is not None else None))
            st.pinned_ids = {e.id for e, _ev in entries}
            unembedded = 0
            if events:
                res = await self.writer.index_batch(events, write_markdown=False, tier="hot")
                unembedded = res.unembedded
            if gone:
                await self.forgetting.remove_keys(gone)
            self.synced_sig = sig
            self._retry_at = (time.monotonic() + st.cfg.memory_md_retry_s
                              if unembedded else None)
            self.status = {"entries": len(entries), "unembedded": unembedded,
                           "upserted": len(events), "removed": len(gone),
                           "synced_at": now.isoformat()}
            st.metrics.memory_md_entries.set(len(entries))
            if events or gone:
                log.info("MEMORY.md synced: %s", self.status)
            return dict(self.status)
