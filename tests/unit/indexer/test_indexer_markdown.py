"""Markdown daily log: lossless round-trip, skip of known keys, forget with audit line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from totalrecall_indexer.adapters.markdown_log import MarkdownLog
from totalrecall_schema import EmbeddedEvent, EventMetadata, MemoryEvent
from totalrecall_schema.daily_log import LogRecord, parse_daily, render_record

TRICKY = (
    "## not a heading\n<!-- tr:event {\"event\": {\"summary\": \"fake\"}} -->\n"
    "```python\nprint('fence inside')\n```\n````\n`````\n"
    "<script>alert(1)</script> & &amp; --> -- <!-- x -->\n"
    "tabs\tand trailing spaces   \n\r\nwindows line\rcr only\u2028ls\u2029ps\x85nel\x0cff"
    "\n\n\n"
)


def _event(i: int = 0, **kw: object) -> MemoryEvent:
    base: dict[str, object] = dict(
        id=f"ev-{i}", timestamp=datetime(2026, 11, 20, 13, 5, i % 60, 123456, tzinfo=UTC),
        category="error", subcategory="application", summary=f"nginx failed `to` start #{i}",
        detail=TRICKY, actor="watcher", source="journal",
        metadata=EventMetadata(severity="error", service="nginx.service", tags=["web", "a`b"],
                               exit_code=1, custom={"nested": ["-->", 1]}),
    )
    base.update(kw)
    return MemoryEvent(**base)  # type: ignore[arg-type]


def test_round_trip_is_lossless() -> None:
    recs = [LogRecord(event=_event(i), model="m:abc", embedded=i % 2 == 0, repeat_count=i + 1,
                      last_seen=datetime(2026, 11, 20, 14, tzinfo=UTC) if i else None)
            for i in range(3)]
    text = "# Memory log — 2026-11-20\n\nsome human note\n\n" + "".join(
        render_record(r) for r in recs)
    parsed = parse_daily(text)
    assert [p.event for p in parsed] == [r.event for r in recs]
    assert parsed[1].event.detail == TRICKY
    assert [(p.model, p.embedded, p.repeat_count, p.last_seen) for p in parsed] == [
        (r.model, r.embedded, r.repeat_count, r.last_seen) for r in recs]


def test_record_comment_cannot_be_closed_by_content() -> None:
    block = render_record(LogRecord(event=_event(1, summary="--> <!-- tr:event {} -->")))
    comment = next(line for line in block.splitlines() if line.startswith("<!-- tr:event "))
    assert comment.count("-->") == 1 and comment.endswith(" -->")
    assert "<" not in comment[len("<!-- "):] and ">" not in comment[:-len(" -->")]


def test_injected_record_in_detail_is_ignored() -> None:
    fake = render_record(LogRecord(event=_event(7, id="injected")))
    ev = _event(1, detail=fake)
    parsed = parse_daily(render_record(LogRecord(event=ev)))
    assert [p.event.id for p in parsed] == ["ev-1"]
    assert parsed[0].event.detail == fake


def test_minimal_event_round_trip() -> None:
    ev = MemoryEvent(summary="x")
    assert parse_daily(render_record(LogRecord(event=ev)))[0].event == ev


def test_append_skips_known_keys_and_records_repeats(tmp_path: Path) -> None:
    md = MarkdownLog(tmp_path / "memory")
    e1, e2 = _event(1), _event(2)
    r = md.append([LogRecord(event=e1), LogRecord(event=e2)])
    assert (r.written, r.skipped) == (2, 0)
    path = md.path_for(e1.timestamp.date())
    assert path.name == "2026-11-20.md"
    # a fresh writer (restart) loads the key index from the file
    md2 = MarkdownLog(tmp_path / "memory")
    r = md2.append([LogRecord(event=e1), LogRecord.from_embedded(
        EmbeddedEvent(event=e2, repeat_count=5))])
    assert (r.written, r.skipped, r.seen_updates) == (0, 1, 1)
    recs = md2.read_day(e1.timestamp.date())
    assert [x.event.id for x in recs] == ["ev-1", "ev-2"]
    assert recs[1].repeat_count == 5
    records = [ln for ln in path.read_text().splitlines()
               if ln.startswith('<!-- tr:event {"event":{"id"')]
    assert len(records) == 2


def test_day_is_utc_date_of_event(tmp_path: Path) -> None:
    md = MarkdownLog(tmp_path)
    tz = datetime(2026, 11, 21, 0, 30, tzinfo=UTC).astimezone(
        __import__("datetime").timezone(timedelta(hours=5)))
    ev = _event(1, timestamp=tz)
    md.append([LogRecord(event=ev)])
    assert (tmp_path / "daily" / "2026-11-21.md").exists()


def test_forget_removes_block_and_leaves_audit(tmp_path: Path) -> None:
    md = MarkdownLog(tmp_path)
    evs = [_event(i) for i in range(3)]
    md.append([LogRecord(event=e) for e in evs])
    md.append([LogRecord(event=evs[1], repeat_count=3)])
    removed = md.forget([evs[1].key])
    assert removed == {"2026-11-20": 1}
    text = md.path_for(evs[0].timestamp.date()).read_text()
    assert "ev-1" not in text.split("tr:forgotten")[0]
    assert "tr:forgotten" in text and evs[1].key in text
    assert [r.event.id for r in md.read_day(evs[0].timestamp.date())] == ["ev-0", "ev-2"]
    assert [r.event for r in md.read_day(evs[0].timestamp.date())] == [evs[0], evs[2]]
    # forgotten key may be written again (e.g. re-ingested later)
    assert md.append([LogRecord(event=evs[1])]).written == 1
