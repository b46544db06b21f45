"""The Markdown daily log on disk (`<home>/memory/daily/YYYY-MM-DD.md`): appends, reads and
forgets, with every change fsynced. The format is `totalrecall_schema.daily_log`.

Crash safety: every append writes whole blocks in one `write` and fsyncs before the batch is acked,
but a process killed inside that `write` leaves a *torn* last block (a partial heading, half a
record line, or an unclosed ```` fence that would swallow every later block). Before a day file is
appended to again — and for every file touched since the last clean shutdown, at startup — its tail
is checked (`find_torn_tail`): a torn block of ours is cut off (the bytes are saved under
`<memory>/.recovered/`) and the unacked batch that wrote it is redelivered and rewritten.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from totalrecall_schema.daily_log import (
    LogRecord,
    day_of,
    file_header,
    iter_blocks,
    parse_daily,
    render_forgotten,
    render_record,
    render_seen,
    scan_keys,
)

from ..core.torn_tail import find_torn_tail

log = logging.getLogger("totalrecall.indexer")


# --- the log ---------------------------------------------------------------------------------
@dataclass
class AppendResult:
    written: int = 0
    skipped: int = 0
    seen_updates: int = 0
    files: set[Path] = field(default_factory=set)


class MarkdownLog:
    """Appends memories to the daily files (fsynced), skipping keys already recorded that day.

    The per-day key index is loaded lazily from the file the first time a day is touched.
    Methods are synchronous (file I/O): call them from a worker thread.
    """

    #: Written at a clean shutdown: files not modified since need no tail check at startup.
    CLEAN_MARKER = ".indexer-clean-shutdown"

    def __init__(self, root: Path, on_repair: Callable[[Path, str], None] | None = None) -> None:
        self.root = Path(root)
        self.daily_dir = self.root / "daily"
        self.recovered_dir = self.root / ".recovered"
        self.on_repair = on_repair
        self._index: dict[date, dict[str, int]] = {}
        self._lock = threading.Lock()

    def path_for(self, day: date) -> Path:
        return self.daily_dir / f"{day.isoformat()}.md"

    def _keys(self, day: date) -> dict[str, int]:
        idx = self._index.get(day)
        if idx is None:
            path = self.path_for(day)
            if path.exists():
                text = self._repair(day, _read(path))  # before the first append in this process
                idx = scan_keys(text)
            else:
                idx = {}
            self._index[day] = idx
        return idx

    # --- crash recovery --------------------------------------------------------------------
    def _repair(self, day: date, text: str) -> str:
        """Mend a torn tail of one day file (caller holds the lock); returns the new text."""
        fix = find_torn_tail(text, file_header(day))
        if fix is None:
            return text
        path = self.path_for(day)
        removed = text[fix.cut:]
        if removed:
            self.recovered_dir.mkdir(parents=True, exist_ok=True)
            saved = self.recovered_dir / f"{day.isoformat()}.{time.time_ns()}.torn.md"
            with open(saved, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
                fh.write(removed)
                fh.flush()
                os.fsync(fh.fileno())
        new = text[: fix.cut] + fix.append
        _atomic_write(path, new)
        log.warning("repaired %s: %s (%d chars cut%s)", path.name, fix.reason, len(removed),
                    f", saved to {self.recovered_dir.name}/" if removed else "")
        if self.on_repair is not None:
            self.on_repair(path, fix.reason)
        return new

    def recover(self) -> list[str]:
        """At startup: check the tail of every day file modified since the last clean shutdown
        (all of them when there was none) and repair torn ones. Returns the repaired days."""
        marker = self.root / self.CLEAN_MARKER
        since: float | None = None
        try:
            since = float(marker.read_text().strip()) - 5.0
        except (OSError, ValueError):
            since = None
        repaired: list[str] = []
        with self._lock:
            for day in self.days():
                path = self.path_for(day)
                try:
                    if since is not None and path.stat().st_mtime < since:
                        continue
                    text = _read(path)
                except OSError:
                    continue
                if self._repair(day, text) is not text:
                    repaired.append(day.isoformat())
                self._index.pop(day, None)  # re-read lazily
        # The marker stays as it is: after another crash, every file touched since that clean
        # shutdown is checked again.
        return repaired

    def mark_clean(self) -> None:
        """Record a clean shutdown (every append finished)."""
        with self._lock, contextlib.suppress(OSError):
            self.root.mkdir(parents=True, exist_ok=True)
            _atomic_write(self.root / self.CLEAN_MARKER, f"{time.time():.3f}\n")

    def contains(self, key: str, day: date) -> bool:
        with self._lock:
            return key in self._keys(day)

    def append(self, records: Iterable[LogRecord]) -> AppendResult:
        result = AppendResult()
        by_day: dict[date, list[LogRecord]] = {}
        for rec in records:
            by_day.setdefault(day_of(rec.event), []).append(rec)
        any_created = False
        with self._lock:
            self.daily_dir.mkdir(parents=True, exist_ok=True)
            for day, recs in sorted(by_day.items()):
                idx = self._keys(day)
                chunks: list[str] = []
                new: dict[str, int] = {}
                for rec in recs:
                    known = idx.get(rec.key, new.get(rec.key))
                    if known is None:
                        chunks.append(render_record(rec))
                        new[rec.key] = rec.repeat_count
                        result.written += 1
                    elif rec.repeat_count > known:
                        chunks.append(render_seen(rec.key, rec.repeat_count, rec.last_seen))
                        new[rec.key] = rec.repeat_count
                        result.seen_updates += 1
                    else:
                        result.skipped += 1
                if not chunks:
                    continue
                path = self.path_for(day)
                created = not path.exists()
                prefix = file_header(day) if created else _separator(path, file_header(day))
                # One write of whole blocks, then fsync; a crash inside it leaves a torn tail
                # that `_keys` repairs before the next append (the batch is not acked yet).
                data = (prefix + "".join(chunks)).encode("utf-8")
                size = 0 if created else path.stat().st_size
                try:
                    with open(path, "ab") as fh:
                        fh.write(data)
                        fh.flush()
                        os.fsync(fh.fileno())
                except OSError:
                    self._undo_append(day, path, size, created)
                    raise
                any_created = any_created or created
                idx.update(new)
                result.files.add(path)
            if any_created:  # make the new file names durable too (once per batch)
                _fsync_dir(self.daily_dir)
        return result

    def _undo_append(self, day: date, path: Path, size: int, created: bool) -> None:
        """(Lock held.) An append that failed (a full disk) may have written part of its
        blocks: cut the file back to its size before, so that the redelivered batch appends
        them once, whole. Should that fail too, the day's key index is read again (and a torn
        tail cut) before its next append."""
        self._index.pop(day, None)
        try:
            if created:
                path.unlink(missing_ok=True)
                return
            os.truncate(path, size)
            with open(path, "rb+") as fh:
                os.fsync(fh.fileno())
        except OSError as exc:
            log.warning("could not cut %s back after a failed append (%s); its tail is checked "
                        "before the next append", path.name, exc)

    def days(self) -> list[date]:
        if not self.daily_dir.exists():
            return []
        out = []
        for p in self.daily_dir.glob("*.md"):
            try:
                out.append(date.fromisoformat(p.stem))
            except ValueError:
                continue
        return sorted(out)

    def read_day(self, day: date) -> list[LogRecord]:
        path = self.path_for(day)
        if not path.exists():
            return []
        return parse_daily(_read(path))

    def iter_all(self) -> Iterator[LogRecord]:
        for day in self.days():
            yield from self.read_day(day)

    def forgotten_keys(self) -> set[str]:
        """Every key a `tr:forgotten` line of a daily file names (the audit trail of forget).
        Some may have been written again after it (before tombstones existed): callers subtract
        the live records."""
        keys: set[str] = set()
        with self._lock:
            for day in self.days():
                path = self.path_for(day)
                if not path.exists():
                    continue
                for block in iter_blocks(_read(path)):
                    if block.kind == "forgotten" and block.payload is not None:
                        keys.update(k for k in block.payload.get("keys", [])
                                    if isinstance(k, str))
        return keys

    def forget(self, keys: Iterable[str], days: Iterable[date] | None = None,
               reason: str = "forget") -> dict[str, int]:
        """Remove the memories with these keys (and their seen-lines) from the daily files and
        leave an audit line in their place. `days` narrows the files searched (else all).
        Returns {day: removed}. Files are rewritten atomically (tmp + fsync + rename)."""
        return {day: len(gone) for day, gone in self.forget_keys(keys, days, reason).items()}

    def forget_keys(self, keys: Iterable[str], days: Iterable[date] | None = None,
                    reason: str = "forget") -> dict[str, list[str]]:
        """`forget`, returning {day: [the keys removed from that day's file]}. The lock is
        taken file by file: a search of every file does not hold appends up for its length."""
        wanted = set(keys)
        removed: dict[str, list[str]] = {}
        for day in sorted(set(days) if days is not None else set(self.days())):
            with self._lock:
                gone = self._forget_in(day, wanted, reason)
            if gone:
                removed[day.isoformat()] = gone
        return removed

    def _forget_in(self, day: date, wanted: set[str], reason: str) -> list[str]:
        """Remove `wanted` from one day's file (caller holds the lock); the keys removed."""
        idx = self._index.get(day)
        if idx is not None and wanted.isdisjoint(idx):
            return []  # the file's key index (loaded from it, kept current) has none of them
        path = self.path_for(day)
        if not path.exists():
            return []
        out: list[str] = []
        gone: list[str] = []
        for block in iter_blocks(_read(path)):
            if block.kind in ("event", "seen") and block.key in wanted:
                if block.kind == "event" and block.key not in gone:
                    gone.append(block.key)
                continue
            out.extend(block.lines)
        if not gone:
            return []
        body = "".join(out)
        if body and not body.endswith("\n"):
            body += "\n"
        body += render_forgotten(gone, datetime.now(UTC), reason)
        _atomic_write(path, body)
        if idx is not None:
            for k in gone:
                idx.pop(k, None)
        return gone

    def reset_index(self) -> None:
        with self._lock:
            self._index.clear()

    # --- MEMORY.md (next to the daily logs; the user's file: read, never written) ---------------
    @property
    def memory_md_path(self) -> Path:
        return self.root / "MEMORY.md"

    def memory_md_signature(self) -> tuple[int, int] | None:
        """MEMORY.md's (mtime_ns, size): None when it cannot be read."""
        try:
            st = self.memory_md_path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def read_memory_md(self) -> tuple[tuple[int, int] | None, str]:
        """MEMORY.md's signature and text; (None, "") when there is no such file."""
        path = self.memory_md_path
        try:
            st = path.stat()
            return (st.st_mtime_ns, st.st_size), path.read_text("utf-8", "replace")
        except FileNotFoundError:
            return None, ""


def _separator(path: Path, header: str) -> str:
    """What to write before appending to an existing file so that our block starts on its own
    paragraph (the file may end in a hand edit without a blank line, or be empty)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size == 0:
                return header
            fh.seek(max(0, size - 2))
            end = fh.read()
    except OSError:
        return ""
    if end.endswith(b"\n\n") or (size == 1 and end == b"\n"):
        return ""
    return "\n" if end.endswith(b"\n") else "\n\n"


def _atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text`: temporary file, fsync, rename, fsync of the directory."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _read(path: Path) -> str:
    # surrogateescape: a crash can cut a UTF-8 sequence in half; such bytes survive a rewrite.
    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fh:
        return fh.read()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
