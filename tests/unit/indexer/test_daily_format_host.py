"""The Markdown daily log keeps the host each memory happened on; a log written before hosts
were kept still parses, its memories read as the local host's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from totalrecall_indexer.adapters.markdown_log import MarkdownLog
from totalrecall_schema import MemoryEvent
from totalrecall_schema.daily_log import LogRecord, parse_daily, render_record

from tests.unit.host_helpers import local_host_as

TS = datetime(2026, 11, 20, 13, 5, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with local_host_as(monkeypatch, "rebuilder", "1" * 32):
        yield


def _event(i: int, host: str | None, summary: str = "nginx failed") -> MemoryEvent:
    meta: dict[str, object] = {"severity": "error", "service": "nginx"}
    if host is not None:
        meta["host"] = host
    return MemoryEvent(id=f"ev-{i}", timestamp=TS, category="system.service", summary=summary,
                       source="journal", metadata=meta)


def test_two_hosts_same_line_round_trip_with_their_hosts(tmp_path: Path) -> None:
    md = MarkdownLog(tmp_path / "memory")
    a, b = _event(1, "web-01"), _event(2, "DB-01")
    assert md.append([LogRecord(event=a), LogRecord(event=b)]).written == 2
    text = md.path_for(TS.date()).read_text()
    assert "host `web-01`" in text and "host `db-01`" in text  # for people, on the id line
    # what a rebuild reads: a fresh reader of the files
    back = {r.event.id: r.event for r in MarkdownLog(tmp_path / "memory").iter_all()}
    assert back["ev-1"].metadata.host == "web-01" and back["ev-2"].metadata.host == "db-01"
    assert back["ev-1"].metadata.machine_id is None  # another machine's id is not made up
    assert back["ev-1"] == a and back["ev-2"] == b


def test_a_record_of_this_machine_keeps_its_machine_id() -> None:
    ev = _event(3, None)
    parsed = parse_daily(render_record(LogRecord(event=ev)))
    assert (parsed[0].event.metadata.host, parsed[0].event.metadata.machine_id) == (
        "rebuilder", "1" * 32)


def test_a_log_written_before_hosts_were_kept_still_parses_as_the_local_host() -> None:
    # A record exactly as the indexer wrote it before: no host, no machine id in its metadata.
    old_event = {"id": "old-1", "timestamp": TS.isoformat(), "namespace": "default",
                 "category": "system.service", "subcategory": "general", "actor": "system",
                 "source": "journal", "summary": "nginx failed", "detail": "",
                 "metadata": {"severity": "error", "service": "nginx", "package": None,
                              "path": None, "generation": None, "exit_code": None,
                              "duration_ms": None, "tags": []}}
    record = {"event": old_event, "model": "m", "embedded": True, "repeat_count": 2,
              "last_seen": None}
    text = ("# Memory log — 2026-11-20\n\n## 13:05:01Z · system.service/general · nginx failed\n"
            f"<!-- tr:event {json.dumps(record, separators=(',', ':'))} -->\n"
            "- id `old-1` · namespace `default` · severity **error** · actor `system`"
            " · source `journal`\n\n")
    [rec] = parse_daily(text)
    assert rec.event.id == "old-1" and rec.repeat_count == 2
    assert rec.event.metadata.host == "rebuilder"
    assert rec.event.metadata.machine_id == "1" * 32
