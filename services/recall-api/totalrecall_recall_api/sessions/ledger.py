"""The agent's action ledger behind POST/GET /memory/ledger: append (hash-chained, fsynced, one
writer at a time), then feed the new entries to memory like ingested events."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from totalrecall_schema.ledger import LedgerAppend, LedgerFile, memory_event

from ..ports import Publisher

log = logging.getLogger("totalrecall.recall.ledger")


class Ledger:
    """One per API process. The file lock inside `LedgerFile.append` serialises writers across
    processes; the asyncio lock keeps this process's appends off the thread pool while one waits.

    Publishing comes after the durable append. `<ledger>.published` remembers the last entry
    that reached JetStream: an entry whose publish failed (NATS down) is published with the next
    append, also after a restart. Memory ids come from entry hashes, so a repeat is a no-op."""

    def __init__(self, path: Path, publisher: Publisher, namespace: str = "default") -> None:
        self.file = LedgerFile(path)
        self.watermark_path = path.with_name(path.name + ".published")
        self.publisher, self.namespace = publisher, namespace
        self._lock = asyncio.Lock()
        self._published: int | None = None

    def _read_watermark(self) -> int:
        try:
            return int(self.watermark_path.read_text().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return 0

    def _write_watermark(self, seq: int) -> None:
        # No fsync: a stale watermark only republishes entries, which is idempotent.
        tmp = self.watermark_path.with_name(self.watermark_path.name + ".tmp")
        tmp.write_text(f"{seq}\n")
        tmp.replace(self.watermark_path)

    async def append(self, req: LedgerAppend) -> tuple[dict[str, Any], bool]:
        """(the written entry, whether every entry up to it is published)."""
        async with self._lock:
            entry = await asyncio.to_thread(self.file.append, req)
            if self._published is None:
                self._published = await asyncio.to_thread(self._read_watermark)
            if self._published == entry["seq"] - 1:
                pending = [entry]
            else:  # an earlier publish failed, or a watermark from before a restart
                pending = await asyncio.to_thread(self.file.read, self._published)
            events = []
            for e in pending:
                try:
                    events.append(memory_event(e, self.namespace))
                except ValueError as exc:  # e.g. written by hand: it can never be a memory
                    log.error("ledger entry %s cannot become a memory, skipped: %s", e["seq"], exc)
            try:
                await self.publisher.publish(events)
            except Exception as exc:  # the entry is durable: report, publish it next time
                log.warning("ledger entries %d..%d not published yet: %s",
                            pending[0]["seq"], entry["seq"], exc)
                return entry, False
            self._published = entry["seq"]
            await asyncio.to_thread(self._write_watermark, entry["seq"])
            return entry, True

    async def read(self, since_seq: int, limit: int) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.file.read, since_seq, limit)
