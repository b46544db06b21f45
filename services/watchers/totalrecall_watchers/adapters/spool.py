"""A bounded on-disk spool: events that could not be published wait here (across restarts).

One file per event in a directory, written to a temp name, fsynced, renamed, and the directory
fsynced: a crash leaves either the whole event or nothing. Names sort by arrival, so draining
keeps order. When the spool is over `max_events` or `max_bytes`, the oldest events are dropped
(counted in `dropped`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_SUFFIX = ".json"


@dataclass
class SpoolEntry:
    name: str
    size: int


class Spool:
    def __init__(self, directory: Path, *, max_events: int = 10_000,
                 max_bytes: int = 64 * 1024 * 1024) -> None:
        self.dir = Path(directory)
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.dropped = 0
        self.corrupt = 0
        self.appended = 0
        self._seq = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        for tmp in self.dir.glob(".tmp-*"):
            with contextlib.suppress(OSError):
                tmp.unlink()
        self._entries: list[SpoolEntry] = []
        for p in sorted(self.dir.glob("*" + _SUFFIX)):
            try:
                self._entries.append(SpoolEntry(p.name, p.stat().st_size))
            except OSError:
                continue
        self._bytes = sum(e.size for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def _next_name(self, key: str) -> str:
        self._seq = (self._seq + 1) % 1_000_000
        safe = "".join(c for c in key if c.isalnum())[:40] or "event"
        return f"{time.time_ns():020d}-{self._seq:06d}-{safe}{_SUFFIX}"

    def append(self, key: str, payload: bytes) -> None:
        name = self._next_name(key)
        tmp = self.dir / f".tmp-{name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.dir / name)
        self._fsync_dir()
        self._entries.append(SpoolEntry(name, len(payload)))
        self._bytes += len(payload)
        self.appended += 1
        self._enforce_bounds()

    def _enforce_bounds(self) -> None:
        while self._entries and (len(self._entries) > self.max_events
                                 or self._bytes > self.max_bytes):
            oldest = self._entries.pop(0)
            self._bytes -= oldest.size
            with contextlib.suppress(FileNotFoundError):
                (self.dir / oldest.name).unlink()
            self.dropped += 1
            log.warning("spool full: dropped the oldest event %s", oldest.name)

    def peek(self, limit: int = 100) -> list[tuple[str, bytes]]:
        """The oldest `limit` entries as (name, payload); unreadable files are dropped."""
        out: list[tuple[str, bytes]] = []
        for entry in list(self._entries[:limit]):
            try:
                out.append((entry.name, (self.dir / entry.name).read_bytes()))
            except OSError:
                self._forget(entry.name)
                self.corrupt += 1
        return out

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / name).unlink()
        self._forget(name)

    def _forget(self, name: str) -> None:
        for i, e in enumerate(self._entries):
            if e.name == name:
                self._bytes -= e.size
                del self._entries[i]
                return

    def _fsync_dir(self) -> None:
        try:
            fd = os.open(self.dir, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
