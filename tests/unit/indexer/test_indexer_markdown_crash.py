"""Markdown daily log after a crash mid-append: a torn tail is detected and cut off, and the
redelivered batch then writes the file byte for byte as an uninterrupted run would have."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from totalrecall_indexer.adapters.markdown_log import MarkdownLog
from totalrecall_indexer.core.torn_tail import find_torn_tail
from totalrecall_schema import EventMetadata, MemoryEvent
from totalrecall_schema.daily_log import (
    LogRecord,
    file_header,
    iter_blocks,
    parse_daily,
    render_record,
    scan_keys,
)

DAY = date(2026, 11, 20)
DETAIL = ("line one\n```python\nprint('fence inside')\n```\n````\n## not a heading\n"
          "<!-- tr:event {\"event\": {\"id\": \"fake\"}} -->\nÜnïcödé ✓ 日本語 \u2028 end\n\n")


def _rec(i: int, detail: str = DETAIL, repeat: int = 1) -> LogRecord:
    ev = MemoryEvent(id=f"ev-{i}", timestamp=datetime(2026, 11, 20, 9, 0, i, tzinfo=UTC),
                     category="error", subcategory="application",
                     summary=f"nginx failed `to` start #{i} — ✓", detail=detail,
                     metadata=EventMetadata(severity="error", service="nginx", tags=["a", "b"]))
    return LogRecord(event=ev, model="m:1", embedded=True, repeat_count=repeat)


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)  # thousands of rewrites below


def _blocks_per_key(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for b in iter_blocks(text):
        if b.kind == "event" and b.key:
            out[b.key] = out.get(b.key, 0) + 1
    return out


def _every_cut(tmp_path: Path, before: list[list[LogRecord]], last: list[LogRecord]) -> int:
    """Write `before` batches then `last`; for every byte at which the `last` append could have
    been cut, restore that torn file, restart, redeliver `last`: the result must be identical."""
    ref = MarkdownLog(tmp_path / "ref")
    for batch in before:
        ref.append(batch)
    path = ref.path_for(DAY)
    prev = path.read_bytes() if path.exists() else b""
    ref.append(last)
    full = path.read_bytes()
    assert len(full) > len(prev)
    work = MarkdownLog(tmp_path / "work")
    work.daily_dir.mkdir(parents=True, exist_ok=True)
    target = work.path_for(DAY)
    repaired = 0
    for cut in range(len(prev), len(full)):
        target.write_bytes(full[:cut])
        log = MarkdownLog(tmp_path / "work")  # a restarted indexer
        if log.recover():
            repaired += 1
        log.append(last)
        got = target.read_bytes()
        assert got == full, f"cut at byte {cut}/{len(full)}: {got[len(prev):]!r}"
    return repaired


def test_torn_record_anywhere_is_repaired_and_rewritten(tmp_path: Path) -> None:
    repaired = _every_cut(tmp_path, [[_rec(0), _rec(1, detail="")]], [_rec(2), _rec(3)])
    assert repaired > 100
    saved = list((tmp_path / "work" / ".recovered").glob("2026-11-20.*.torn.md"))
    assert saved  # nothing is thrown away without a copy


def _as_an_older_writer_wrote_it(i: int, detail: str = DETAIL) -> LogRecord:
    """A record that today's renderer, given its own JSON back, renders differently: built
    without validation, it has no host (validating the JSON fills one in), as records written
    before hosts were kept or by another version of the renderer differ."""
    ev = MemoryEvent.model_construct(
        id=f"old-{i}", timestamp=datetime(2026, 11, 20, 10, 0, i, tzinfo=UTC), namespace="default",
        category="file", subcategory="modify", actor="system", source="test",
        summary=f"file {i} changed", detail=detail, metadata=EventMetadata(tags=["t"]))
    return LogRecord(event=ev)


def test_torn_record_is_recognised_by_what_was_written_not_by_rendering_it_again(
        tmp_path: Path) -> None:
    rec = _as_an_older_writer_wrote_it(1)
    assert render_record(LogRecord.from_json(rec.to_json())) != render_record(rec)  # the premise
    repaired = _every_cut(tmp_path, [[_as_an_older_writer_wrote_it(0)]],
                          [rec, _as_an_older_writer_wrote_it(2, detail="")])
    assert repaired > 100


def test_torn_first_record_and_header(tmp_path: Path) -> None:
    _every_cut(tmp_path, [], [_rec(0)])


def test_torn_seen_line(tmp_path: Path) -> None:
    _every_cut(tmp_path, [[_rec(0), _rec(1)]], [_rec(1, repeat=4)])


def test_sound_files_are_left_alone(tmp_path: Path) -> None:
    log = MarkdownLog(tmp_path)
    log.append([_rec(0), _rec(1)])
    log.append([_rec(1, repeat=3)])
    text = log.path_for(DAY).read_text()
    assert find_torn_tail(text, file_header(DAY)) is None
    assert "".join("".join(b.lines) for b in iter_blocks(text)) == text
    assert MarkdownLog(tmp_path).recover() == []
    # a forget rewrite is sound too
    log.forget([_rec(0).key])
    assert find_torn_tail(log.path_for(DAY).read_text(), file_header(DAY)) is None


def test_hand_edits_are_kept_and_separated(tmp_path: Path) -> None:
    log = MarkdownLog(tmp_path)
    log.append([_rec(0)])
    path = log.path_for(DAY)
    with open(path, "a") as fh:
        fh.write("A note I typed myself, no newline")
    log2 = MarkdownLog(tmp_path)
    assert log2.recover() == []
    log2.append([_rec(1)])
    text = path.read_text()
    assert "A note I typed myself, no newline\n\n## " in text
    assert [r.event.id for r in parse_daily(text)] == ["ev-0", "ev-1"]


def test_unclosed_fence_in_a_hand_edit_is_closed(tmp_path: Path) -> None:
    log = MarkdownLog(tmp_path)
    log.append([_rec(0)])
    path = log.path_for(DAY)
    with open(path, "a") as fh:
        fh.write("my snippet:\n\n```sh\nls -l\n")
    log2 = MarkdownLog(tmp_path)
    assert log2.recover() == ["2026-11-20"]
    log2.append([_rec(1)])
    text = path.read_text()
    assert "```sh\nls -l\n```\n" in text  # kept, and closed
    assert set(scan_keys(text)) == {_rec(0).key, _rec(1).key}


def test_recover_checks_only_files_touched_since_clean_shutdown(tmp_path: Path) -> None:
    log = MarkdownLog(tmp_path)
    log.append([_rec(0)])
    path = log.path_for(DAY)
    full = path.read_bytes()
    path.write_bytes(full + b"## 10:00:00Z \xc2")  # torn mid-heading, mid-UTF-8 sequence
    old = datetime(2026, 1, 1).timestamp()
    os.utime(path, (old, old))
    log.mark_clean()  # claims: nothing was touched after this
    assert MarkdownLog(tmp_path).recover() == []  # trusted: not even read
    (tmp_path / MarkdownLog.CLEAN_MARKER).unlink()  # after a crash: no marker
    assert MarkdownLog(tmp_path).recover() == ["2026-11-20"]
    assert path.read_bytes() == full
    saved = next((tmp_path / ".recovered").glob("*.torn.md"))
    assert saved.read_bytes() == b"## 10:00:00Z \xc2"


def test_every_key_once_after_repeated_crashes(tmp_path: Path) -> None:
    """Crash after crash at different points of successive batches: each key once."""
    recs = [_rec(i) for i in range(12)]
    log = MarkdownLog(tmp_path)
    path = log.path_for(DAY)
    done = 0
    for n, cut_frac in enumerate((0.3, 0.9, 0.5, 0.05)):
        batch = recs[done: done + 3]
        before = path.read_bytes() if path.exists() else b""
        log.append(batch)
        after = path.read_bytes()
        torn = len(before) + int((len(after) - len(before)) * cut_frac)
        path.write_bytes(after[:torn])  # the crash
        log = MarkdownLog(tmp_path)  # restart
        log.recover()
        log.append(batch)  # redelivery
        done += 3
        assert _blocks_per_key(path.read_text()) == {r.key: 1 for r in recs[:done]}, n
    assert [r.event for r in log.read_day(DAY)] == [r.event for r in recs]
