"""The Markdown daily log's format: the ground truth every other store can be rebuilt from.

The one writer (`render_record`, `render_seen`, `render_forgotten`, `file_header`) and the one
reader (`iter_blocks`, `parse_daily`, `scan_keys`) of the format: the indexer writes and rebuilds
from these files, recall-api cites and serves them (`citations`), the tests check them.

One file per UTC day, `<home>/memory/daily/YYYY-MM-DD.md`. Each memory is a block that people can
read, and that a program can parse back exactly:

    ## 14:03:21Z · error/application · nginx failed to start
    <!-- tr:event {"event": {...}, "model": "...", "repeat_count": 1, ...} -->
    - id `abc` · namespace `default` · host `web-01` · severity **error** · actor `system` · …
    - tags: web, nginx

    ````text
    the detail, verbatim (the fence is longer than any backtick run inside it)
    ````

The HTML comment carries the full record as one JSON line; `<`, `>` and `&` are escaped as
`\\u003c` … inside it, so no text in a memory can close the comment. The parser only trusts
comment lines outside fenced blocks, so a detail that *contains* something looking like a record
cannot inject one. The host an event happened on is in the record's metadata (`host`,
`machine_id`), shown on the id line; a record written before hosts were kept has none and is
read as the local host's (`MemoryEvent` fills it in). Later lines may record that a memory was
seen again (`tr:seen`) or forgotten (`tr:forgotten`, the audit trail; the memory's text is
removed from the file).

Pure text in, text out: the file I/O is the indexer's `adapters.markdown_log`; the repair of a
torn tail after a crash is its `core.torn_tail`. A change here is a change of the on-disk format:
files already written must still read (`tests/unit/schema/test_daily_log.py` holds a file the
format's first writer wrote).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from .events import EmbeddedEvent, MemoryEvent, memory_key

EVENT_TAG = "<!-- tr:event "
SEEN_TAG = "<!-- tr:seen "
FORGOTTEN_TAG = "<!-- tr:forgotten "
COMMENT_END = " -->"
FENCE_RE = re.compile(r"^(`{3,}|~{3,})")
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


def _longest_backticks(text: str) -> int:
    if "`" not in text:  # most texts: no scan (every record renders several code spans)
        return 0
    return max(len(m) for m in _BACKTICKS_RE.findall(text))


def _code(text: str) -> str:
    """Inline code span that survives backticks inside the text."""
    text = _one_line(text, 300)
    longest = _longest_backticks(text)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence_for(text: str) -> str:
    longest = _longest_backticks(text)
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
        (f"- id {_code(ev.id)} · namespace {_code(ev.namespace)}"
         + (f" · host {_code(ev.host)}" if ev.host else "")
         + f" · severity **{md.severity.value}**"
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
    return "\n".join(lines) + "\n\n" + render_detail(ev.detail)


def render_detail(detail: str) -> str:
    """The fenced detail that ends a memory's block, its blank line included ("" when there is
    no detail)."""
    if not detail:
        return ""
    fence = _fence_for(detail)
    return f"{fence}text\n{detail}\n{fence}\n\n"


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


#: `file_header`'s line, as a reader recognises it (the only text outside records it keeps).
HEADER_RE = re.compile(r"^# Memory log — \d{4}-\d{2}-\d{2}$")


# --- parsing ---------------------------------------------------------------------------------
@dataclass
class ParsedBlock:
    """A span of lines of a daily file (`lines`, with their line ends; the first is line `start`,
    0-based, of the file). `key` is set for memory blocks and seen-lines; `namespace` and
    `memory_id` for memory blocks."""

    lines: list[str]
    kind: str  # "text" | "event" | "seen" | "forgotten"
    key: str | None = None
    payload: dict[str, Any] | None = None
    start: int = 0
    namespace: str | None = None
    memory_id: str | None = None

    @property
    def end(self) -> int:
        """The block's last line (0-based, inclusive)."""
        return self.start + len(self.lines) - 1


def record_line(line: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, payload) of a `<!-- tr:… {json} -->` line (without its line end); None for any
    other line, one whose JSON does not parse or is not an object included (such a line is
    ordinary text)."""
    for tag, kind in ((EVENT_TAG, "event"), (SEEN_TAG, "seen"), (FORGOTTEN_TAG, "forgotten")):
        if line.startswith(tag) and line.endswith(COMMENT_END):
            try:
                payload = json.loads(line[len(tag): -len(COMMENT_END)])
            except ValueError:
                return None
            return (kind, payload) if isinstance(payload, dict) else None
    return None


def _record_key(kind: str, payload: dict[str, Any]) -> tuple[Any, str | None, str | None]:
    """(storage key, namespace, memory id) a record line names: an event's from its event, a
    `seen` record's key alone, none for the others."""
    if kind == "event":
        ev = payload.get("event")
        if isinstance(ev, dict) and isinstance(ev.get("id"), str):
            namespace, memory_id = str(ev.get("namespace") or "default"), ev["id"]
            return memory_key(namespace, memory_id), namespace, memory_id
    elif kind == "seen":
        return payload.get("key"), None, None
    return None, None, None


def iter_blocks(text: str) -> Iterator[ParsedBlock]:
    """Split a daily file into blocks. A memory block runs from its `## ` heading to the next
    heading / record line outside a fence. Fenced content is never interpreted. Every line of
    `text` is in exactly one block, in order."""
    lines = text.splitlines(keepends=True)
    current = ParsedBlock(lines=[], kind="text")
    fence: str | None = None
    pending_heading: list[str] = []

    def flush(at: int) -> Iterator[ParsedBlock]:
        nonlocal current
        if current.lines:
            yield current
        current = ParsedBlock(lines=[], kind="text", start=at)

    for n, line in enumerate(lines):
        stripped = line.rstrip("\r\n")
        if fence is not None:
            current.lines.append(line)
            if stripped == fence:
                fence = None
            continue
        m = FENCE_RE.match(stripped)
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
        record = record_line(stripped)
        if record is None:
            if pending_heading:
                current.lines.extend(pending_heading)
                pending_heading = []
            current.lines.append(line)
            continue
        kind, payload = record
        start = n - len(pending_heading)
        yield from flush(start)
        key, namespace, memory_id = _record_key(kind, payload)
        current = ParsedBlock(lines=[*pending_heading, line], kind=kind, key=key,
                              payload=payload, start=start, namespace=namespace,
                              memory_id=memory_id)
        pending_heading = []
    if pending_heading:
        current.lines.extend(pending_heading)
    yield from flush(len(lines))


def parse_daily(text: str) -> list[LogRecord]:
    """All memories of one daily file, in file order, with later `seen` lines applied and
    forgotten keys removed."""
    records: dict[str, LogRecord] = {}
    for block in iter_blocks(text):
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
    for block in iter_blocks(text):
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
