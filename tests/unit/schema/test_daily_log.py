"""The daily Markdown log's one writer and one reader (`totalrecall_schema.daily_log`).

`fixtures/daily_log_2026-11-20.md` was written by the format's first writer (the indexer's own
module, before the format moved to libs/schema): files already on disk must read the same, and
the writer must still write them byte for byte.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from totalrecall_schema import EventMetadata, MemoryEvent, memory_key
from totalrecall_schema.daily_log import (
    HEADER_RE,
    LogRecord,
    file_header,
    iter_blocks,
    parse_daily,
    render_forgotten,
    render_record,
    render_seen,
    scan_keys,
)

FIXTURE = Path(__file__).parent / "fixtures" / "daily_log_2026-11-20.md"


def _old_file() -> str:
    return FIXTURE.read_text(encoding="utf-8")


def _event(i: int, **kw: object) -> MemoryEvent:
    base: dict[str, object] = dict(
        id=f"ev-{i}", timestamp=datetime(2026, 11, 21, 9, 0, i, tzinfo=UTC), category="error",
        subcategory="application", summary=f"`backticks` and <html> & #{i}",
        detail="````\n<!-- tr:seen {\"key\": \"x\"} -->\n```\n\u2028\x85 -->", actor="watcher",
        source="journal", metadata=EventMetadata(severity="warning", tags=["t`1"], host="h-1",
                                                  path="/etc/x", duration_ms=5))
    base.update(kw)
    return MemoryEvent(**base)  # type: ignore[arg-type]


def test_a_file_of_the_first_writer_reads_as_it_was_written() -> None:
    recs = parse_daily(_old_file())
    assert [(r.event.namespace, r.event.id) for r in recs] == [("default", "ev-1"),
                                                                ("team-a", "ev-2")]
    first, second = recs
    assert first.repeat_count == 2  # its tr:seen line
    assert first.last_seen == datetime(2026, 11, 20, 15, 30, tzinfo=UTC)
    assert first.model == "nomic-embed:abc" and first.embedded
    assert first.event.detail.startswith("```python\nprint('fence inside')\n```\n<!-- tr:event")
    assert first.event.host == "web-01" and first.event.metadata.tags == ["web", "a`b"]
    assert second.repeat_count == 3 and not second.embedded and second.model is None
    assert second.event.summary == "a\u2028b"
    assert scan_keys(_old_file()) == {first.key: 2, second.key: 3}  # ev-3 was forgotten


def test_the_writer_writes_the_first_writers_bytes() -> None:
    text = _old_file()
    blocks = list(iter_blocks(text))
    assert "".join(line for b in blocks for line in b.lines) == text  # every line, in order
    assert blocks[0].kind == "text" and HEADER_RE.match(blocks[0].lines[0].rstrip("\n"))
    assert "".join(blocks[0].lines).startswith(file_header(datetime(2026, 11, 20).date()))
    kinds = [b.kind for b in blocks[1:]]
    assert kinds == ["event", "event", "event", "seen", "forgotten"]
    for b in blocks[1:]:
        p = b.payload
        assert p is not None
        if b.kind == "event":
            again = render_record(LogRecord.from_json(p))
        elif b.kind == "seen":
            again = render_seen(p["key"], p["repeat_count"],
                                datetime.fromisoformat(p["last_seen"]))
        else:
            again = render_forgotten(p["keys"], datetime.fromisoformat(p["at"]), p["reason"])
        assert again == "".join(b.lines)


def test_blocks_know_their_lines() -> None:
    text = _old_file()
    lines = text.splitlines()
    events = [b for b in iter_blocks(text) if b.kind == "event"]
    assert [(b.namespace, b.memory_id) for b in events] == [
        ("default", "ev-1"), ("team-a", "ev-2"), ("default", "ev-3")]
    for b in events:
        assert lines[b.start].startswith("## ")  # the heading opens the block
        assert lines[b.start + 1].startswith("<!-- tr:event ")
        assert b.key == memory_key(b.namespace or "", b.memory_id or "")
        assert lines[b.start:b.end + 1] == [ln.rstrip("\n") for ln in b.lines]


def test_round_trip() -> None:
    recs = [LogRecord(event=_event(i, namespace=f"ns{i % 2}"), model="m" if i else None,
                      embedded=bool(i), repeat_count=i + 1,
                      last_seen=datetime(2026, 11, 21, 10, tzinfo=UTC) if i else None)
            for i in range(4)]
    text = file_header(datetime(2026, 11, 21).date()) + "".join(render_record(r) for r in recs)
    parsed = parse_daily(text)
    assert [p.to_json() for p in parsed] == [r.to_json() for r in recs]
    assert "".join(render_record(p) for p in parsed) == text[len(file_header(
        datetime(2026, 11, 21).date())):]
    # Records in a detail are text: the file still holds four memories.
    assert len(list(b for b in iter_blocks(text) if b.kind == "event")) == 4


def test_a_record_line_that_does_not_parse_is_kept_as_text() -> None:
    good = render_record(LogRecord(event=_event(1)))
    bad = "<!-- tr:event {not json} -->\n<!-- tr:seen [1, 2] -->\n"
    text = good + bad
    blocks = list(iter_blocks(text))
    assert [b.kind for b in blocks] == ["event"]
    assert "".join(blocks[0].lines) == text  # nothing dropped: a rewrite keeps those lines
    assert [r.event.id for r in parse_daily(text)] == ["ev-1"]
