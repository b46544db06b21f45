"""The Markdown daily log: the ground truth every other store can be rebuilt from.

One file per UTC day, `<home>/memory/daily/YYYY-MM-DD.md`. Each memory is a block that people can
read, and that a program can parse back exactly:

    ## 14:03:21Z · error/application · nginx failed to start
    <!-- tr:event {"event": {...}, "model": "...", "repeat_count": 1, ...} -->
    - id `abc` · namespace `default` · severity **error** · actor `system` · source `journal`
    - tags: web, nginx

    ````text
    the detail, verbatim (the fence is longer than any backtick run inside it)
    ````

The HTML comment carries the full record as one JSON line; `<`, `>` and `&` are escaped as
`\\u003c` … inside it, so no text in a memory can close the comment. The parser only trusts
comment lines outside fenced blocks, so a detail that *contains* something looking like a record
cannot inject one. Later lines may record that a memory was seen again (`tr:seen`) or forgotten
(`tr:forgotten`, the audit trail; the memory's text is removed from the file).

Crash safety: every append writes whole blocks in one `write` and fsyncs before the batch is acked,
but a process killed inside that `write` leaves a *torn* last block (a partial heading, half a
record line, or an unclosed ```` fence that would swallow every later block). Before a day file is
appended to again — and for every file touched since the last clean shutdown, at startup — its tail
is checked (`find_torn_tail`): a torn block of ours is cut off (the bytes are saved under
`<memory>/.recovered/`) and the unacked batch that wrote it is redelivered and rewritten.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from totalrecall_schema import EmbeddedEvent, MemoryEvent, memory_key

log = logging.getLogger("totalrecall.indexer")

EVENT_TAG = "<!-- tr:event "
SEEN_TAG = "<!-- tr:seen "
FORGOTTEN_TAG = "<!-- tr:forgotten "
COMMENT_END = " -->"
_FENCE_RE = re.compile(r"^(`{3,}|~{3,})")
_BACKTICKS_RE = re.compile(r"`+")


@dataclass
class LogRecord:
    """One memory as stored in the log (what a rebuild needs besides the vector)."""

    event: MemoryEvent
    model: str | None = None
    embedded: bool = False
    repeat_count: int = 1
    last_seen: datetime | None = None

    @property
    def key(self) -> str:
        return self.event.key

    @classmethod
    def from_embedded(cls, ev: EmbeddedEvent) -> LogRecord:
        return cls(event=ev.event, model=ev.model, embedded=ev.embedded,
                   repeat_count=ev.repeat_count, last_seen=ev.last_seen)

    def to_json(self) -> dict[str, Any]:
        return {
            "event": self.event.model_dump(mode="json"),
            "model": self.model,
            "embedded": self.embedded,
            "repeat_count": self.repeat_count,
            "last_seen": self.last_seen.isoformat() if self.last_seen else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LogRecord:
        last_seen = data.get("last_seen")
        return cls(
            event=MemoryEvent.model_validate(data["event"]),
            model=data.get("model"),
            embedded=bool(data.get("embedded", False)),
            repeat_count=int(data.get("repeat_count", 1)),
            last_seen=datetime.fromisoformat(last_seen) if last_seen else None,
        )


# --- encoding --------------------------------------------------------------------------------
def _comment_json(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    # These characters only ever occur inside JSON strings, where the \u escapes are equivalent.
    # Line/paragraph separators are escaped too so that str.splitlines() never splits the record.
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
            .replace("\x85", "\\u0085"))


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _code(text: str) -> str:
    """Inline code span that survives backticks inside the text."""
    text = _one_line(text, 300)
    longest = max((len(m) for m in _BACKTICKS_RE.findall(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence_for(text: str) -> str:
    longest = max((len(m) for m in _BACKTICKS_RE.findall(text)), default=0)
    return "`" * max(4, longest + 1)


def day_of(ev: MemoryEvent) -> date:
    return ev.timestamp.astimezone(UTC).date()


def render_record(rec: LogRecord) -> str:
    """The Markdown block of one memory (ends with a blank line)."""
    ev = rec.event
    ts = ev.timestamp.astimezone(UTC)
    md = ev.metadata
    lines = [
        f"## {ts.strftime('%H:%M:%S')}Z · {ev.category}/{ev.subcategory} · {_one_line(ev.summary)}",
        f"{EVENT_TAG}{_comment_json(rec.to_json())}{COMMENT_END}",
        (f"- id {_code(ev.id)} · namespace {_code(ev.namespace)} · severity **{md.severity.value}**"
         f" · actor {_code(ev.actor)} · source {_code(ev.source)}"
         + ("" if rec.embedded else " · *not embedded*")),
    ]
    facts = []
    for name in ("service", "package", "path", "generation", "exit_code", "duration_ms"):
        val = getattr(md, name)
        if val is not None:
            facts.append(f"{name} {_code(str(val))}")
    if facts:
        lines.append("- " + " · ".join(facts))
    if md.tags:
        lines.append("- tags: " + ", ".join(_code(t) for t in md.tags))
    if rec.repeat_count > 1:
        lines.append(f"- seen {rec.repeat_count} times")
    if ev.detail:
        fence = _fence_for(ev.detail)
        lines += ["", f"{fence}text", ev.detail, fence]
    return "\n".join(lines) + "\n\n"


def render_seen(key: str, repeat_count: int, last_seen: datetime | None) -> str:
    payload = {"key": key, "repeat_count": repeat_count,
               "last_seen": last_seen.isoformat() if last_seen else None}
    return (f"{SEEN_TAG}{_comment_json(payload)}{COMMENT_END}\n"
            f"_(seen again: {repeat_count} times)_\n\n")


def render_forgotten(keys: list[str], at: datetime, reason: str) -> str:
    payload = {"keys": keys, "at": at.isoformat(), "reason": _one_line(reason, 200)}
    return (f"{FORGOTTEN_TAG}{_comment_json(payload)}{COMMENT_END}\n"
            f"> {len(keys)} memor{'y' if len(keys) == 1 else 'ies'} forgotten at "
            f"{at.strftime('%Y-%m-%d %H:%M:%SZ')}\n\n")


def file_header(day: date) -> str:
    return f"# Memory log — {day.isoformat()}\n\n"


# --- parsing ---------------------------------------------------------------------------------
@dataclass
class ParsedBlock:
    """A span of lines of a daily file; `key` is set for memory blocks and seen-lines."""

    lines: list[str]
    kind: str  # "text" | "event" | "seen" | "forgotten"
    key: str | None = None
    payload: dict[str, Any] | None = None


def _iter_blocks(text: str) -> Iterator[ParsedBlock]:
    """Split a daily file into blocks. A memory block runs from its `## ` heading to the next
    heading / record line outside a fence. Fenced content is never interpreted."""
    lines = text.splitlines(keepends=True)
    current = ParsedBlock(lines=[], kind="text")
    fence: str | None = None
    pending_heading: list[str] = []

    def flush() -> Iterator[ParsedBlock]:
        nonlocal current
        if current.lines:
            yield current
        current = ParsedBlock(lines=[], kind="text")

    for line in lines:
        stripped = line.rstrip("\r\n")
        if fence is not None:
            current.lines.append(line)
            if stripped == fence:
                fence = None
            continue
        m = _FENCE_RE.match(stripped)
        if m:
            if pending_heading:
                current.lines.extend(pending_heading)
                pending_heading = []
            fence = m.group(1)
            current.lines.append(line)
            continue
        if stripped.startswith("## "):
            if pending_heading:
                current.lines.extend(pending_heading)
            pending_heading = [line]
            continue
        for tag, kind in ((EVENT_TAG, "event"), (SEEN_TAG, "seen"), (FORGOTTEN_TAG, "forgotten")):
            if stripped.startswith(tag) and stripped.endswith(COMMENT_END):
                try:
                    payload = json.loads(stripped[len(tag): -len(COMMENT_END)])
                except json.JSONDecodeError:
                    break
                yield from flush()
                key = None
                if kind == "event":
                    ev = payload.get("event") or {}
                    if isinstance(ev.get("id"), str):
                        key = memory_key(str(ev.get("namespace") or "default"), ev["id"])
                elif kind == "seen":
                    key = payload.get("key")
                current = ParsedBlock(lines=[*pending_heading, line], kind=kind, key=key,
                                      payload=payload)
                pending_heading = []
                break
        else:
            if pending_heading:
                current.lines.extend(pending_heading)
                pending_heading = []
            current.lines.append(line)
            continue
    if pending_heading:
        current.lines.extend(pending_heading)
    yield from flush()


def parse_daily(text: str) -> list[LogRecord]:
    """All memories of one daily file, in file order, with later `seen` lines applied and
    forgotten keys removed."""
    records: dict[str, LogRecord] = {}
    for block in _iter_blocks(text):
        if block.kind == "event" and block.payload is not None:
            try:
                rec = LogRecord.from_json(block.payload)
            except Exception:
                continue
            if rec.key not in records:
                records[rec.key] = rec
        elif block.kind == "seen" and block.key in records and block.payload is not None:
            rec = records[block.key]
            rec.repeat_count = max(rec.repeat_count, int(block.payload.get("repeat_count", 1)))
            if block.payload.get("last_seen"):
                rec.last_seen = datetime.fromisoformat(block.payload["last_seen"])
        elif block.kind == "forgotten" and block.payload is not None:
            for k in block.payload.get("keys", []):
                records.pop(k, None)
    return list(records.values())


def scan_keys(text: str) -> dict[str, int]:
    """key -> repeat_count recorded in a daily file (cheap: events are not validated)."""
    keys: dict[str, int] = {}
    for block in _iter_blocks(text):
        if block.key is None or block.payload is None:
            if block.kind == "forgotten" and block.payload is not None:
                for k in block.payload.get("keys", []):
                    keys.pop(k, None)
            continue
        count = int(block.payload.get("repeat_count", 1) or 1)
        if block.kind == "event":
            keys.setdefault(block.key, count)
        elif block.kind == "seen" and block.key in keys:
            keys[block.key] = max(keys[block.key], count)
    return keys


# --- torn tails -------------------------------------------------------------------------------
@dataclass
class TailRepair:
    """How to mend a daily file: keep `text[:cut]`, then add `append`."""

    cut: int
    append: str
    reason: str


def _fence_open_at_end(text: str) -> str | None:
    """The fence still open at the end of `text` (the same rules as `_iter_blocks`)."""
    fence: str | None = None
    for line in text.splitlines():
        if fence is not None:
            if line == fence:
                fence = None
            continue
        m = _FENCE_RE.match(line)
        if m:
            fence = m.group(1)
    return fence


def _expected_block(block: ParsedBlock) -> str | None:
    """What we would have written for this block (None when its payload is not ours)."""
    p = block.payload
    if p is None:
        return None
    try:
        if block.kind == "event":
            return render_record(LogRecord.from_json(p))
        if block.kind == "seen":
            last_seen = datetime.fromisoformat(p["last_seen"]) if p.get("last_seen") else None
            return render_seen(str(p["key"]), int(p["repeat_count"]), last_seen)
        if block.kind == "forgotten":
            return render_forgotten(list(p["keys"]), datetime.fromisoformat(p["at"]),
                                    str(p.get("reason", "")))
    except Exception:
        return None
    return None


def _looks_like_torn_start(rest: str) -> bool:
    """Is `rest` the beginning of a block we append (a heading, possibly cut, plus at most a
    partial record line; or a partial seen/record line), cut short by a crash?"""
    if not rest.strip():
        return False
    lines = rest.split("\n")
    if lines[-1] == "":
        lines.pop()
    first = lines[0].rstrip("\r")
    if first.startswith("## ") or (len(lines) == 1 and "## ".startswith(first)):
        if len(lines) == 1:
            return True
        second = lines[1].rstrip("\r")
        return len(lines) == 2 and (second.startswith(EVENT_TAG) or EVENT_TAG.startswith(second))
    return len(lines) == 1 and any(t.startswith(first) or first.startswith(t)
                                   for t in (EVENT_TAG, SEEN_TAG))


def find_torn_tail(text: str, header: str = "") -> TailRepair | None:
    """How to repair the end of a daily file left by a crash mid-append; None if it is sound.

    A torn block of ours (a strict prefix of what `render_record`/`render_seen` gives for it,
    or the start of a heading/record line) is cut off: its batch was not acknowledged, so it is
    delivered and written again. Anything else (hand edits) is kept; a fence left open at the end
    is closed so that later blocks are not swallowed by it."""
    if not text:
        return None
    # Bytes of a UTF-8 sequence cut in half arrive as surrogate escapes (see `_read`).
    core = text.rstrip("".join(chr(c) for c in range(0xDC80, 0xDD00)))
    fix = _find_torn_tail(core, header)
    if fix is None and core != text:
        return TailRepair(len(core), "", "partial UTF-8 sequence")
    return fix


def _find_torn_tail(text: str, header: str) -> TailRepair | None:
    if not text:
        return None
    if header and text != header and header.startswith(text):
        return TailRepair(0, "", "partial file header")
    blocks = list(_iter_blocks(text))
    starts: list[int] = []
    pos = 0
    for block in blocks:
        starts.append(pos)
        pos += sum(len(line) for line in block.lines)
    last, last_start = blocks[-1], starts[-1]
    if last.kind == "text":  # no record in the file: at most the header and a torn first block
        base = len(header) if header and text.startswith(header) else None
        if base is not None and _looks_like_torn_start(text[base:]):
            return TailRepair(base, "", "torn first block")
    else:
        tail = text[last_start:]
        expected = _expected_block(last)
        if expected is not None:
            if tail == expected:
                return None
            if expected.startswith(tail):
                return TailRepair(last_start, "", f"torn {last.kind} block")
            if tail.startswith(expected):
                rest = tail[len(expected):]
                if _looks_like_torn_start(rest):
                    return TailRepair(last_start + len(expected), "", "torn block start")
    # Not ours, or rendered differently: never cut more than a torn block start after the last
    # blank line; close a fence left open.
    fence = _fence_open_at_end(text)
    if fence is not None:
        return TailRepair(len(text), ("" if text.endswith("\n") else "\n") + fence + "\n\n",
                          "unclosed fence")
    para = text.rfind("\n\n") + 2 if "\n\n" in text else 0
    if para > last_start and _looks_like_torn_start(text[para:]):
        return TailRepair(para, "", "torn block start")
    return None


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
                with open(path, "ab") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                any_created = any_created or created
                idx.update(new)
                result.files.add(path)
            if any_created:  # make the new file names durable too (once per batch)
                _fsync_dir(self.daily_dir)
        return result

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
                for block in _iter_blocks(_read(path)):
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
        for block in _iter_blocks(_read(path)):
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
