"""Mending a daily file whose last append was cut short by a crash (a torn block): what to cut
off, and how to close a fence left open. Pure: `adapters.markdown_log` reads and rewrites the
file."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from totalrecall_schema.daily_log import (
    EVENT_TAG,
    FENCE_RE,
    SEEN_TAG,
    LogRecord,
    ParsedBlock,
    iter_blocks,
    render_detail,
    render_forgotten,
    render_record,
    render_seen,
)


# --- torn tails -------------------------------------------------------------------------------
@dataclass
class TailRepair:
    """How to mend a daily file: keep `text[:cut]`, then add `append`."""

    cut: int
    append: str
    reason: str


def _fence_open_at_end(text: str) -> str | None:
    """The fence still open at the end of `text` (the same rules as `iter_blocks`)."""
    fence: str | None = None
    for line in text.splitlines():
        if fence is not None:
            if line == fence:
                fence = None
            continue
        m = FENCE_RE.match(line)
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


def _event_as_written(tail: str, block: ParsedBlock) -> str | None:
    """A memory block as it was written, whichever version wrote it: its heading, record line and
    fact lines as they stand in the file, then the detail the record line's own JSON holds.

    Today's `render_record` of the parsed record is not always what was written: validating the
    JSON again fills in what the writer left out (a host for an event built without one), and
    another version of the renderer may word the fact lines differently. A torn block must still
    be recognised as ours, or its cut-off detail would be kept and its redelivery skipped."""
    event = (block.payload or {}).get("event")
    detail = event.get("detail", "") if isinstance(event, dict) else None
    if not isinstance(detail, str) or not tail.startswith("## "):
        return None
    record_line_end = tail.find("\n", tail.find("\n") + 1)
    facts_end = tail.find("\n\n", record_line_end) if record_line_end >= 0 else -1
    if facts_end < 0:  # cut before the fact lines ended: what was written goes on past the tail
        return tail + "\n\n"
    return tail[: facts_end + 2] + render_detail(detail)


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
    blocks = list(iter_blocks(text))
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
        rendered = _expected_block(last)
        as_written = _event_as_written(tail, last) if last.kind == "event" else None
        for expected in dict.fromkeys(e for e in (rendered, as_written) if e is not None):
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
