from __future__ import annotations

from pathlib import Path

from totalrecall_schema import MemoryEvent
from totalrecall_watchers.adapters.spool import Spool


def ev(i: int) -> MemoryEvent:
    return MemoryEvent(category="system.process", subcategory="high_cpu", summary=f"event {i}")


def test_roundtrip_in_order_and_across_restarts(tmp_path: Path) -> None:
    sp = Spool(tmp_path / "spool")
    events = [ev(i) for i in range(5)]
    for e in events:
        sp.append(e.key, e.model_dump_json().encode())
    assert len(sp) == 5
    # a new instance (restart) sees the same events, in order
    sp2 = Spool(tmp_path / "spool")
    assert len(sp2) == 5 and sp2.size_bytes == sp.size_bytes
    batch = sp2.peek(3)
    got = [MemoryEvent.model_validate_json(p) for _, p in batch]
    assert [g.summary for g in got] == ["event 0", "event 1", "event 2"]
    assert [g.key for g in got] == [e.key for e in events[:3]]
    for name, _ in batch:
        sp2.remove(name)
    assert [MemoryEvent.model_validate_json(p).summary for _, p in Spool(tmp_path / "spool")
            .peek()] == ["event 3", "event 4"]


def test_bounded_by_count_drops_oldest(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_events=3)
    for i in range(7):
        e = ev(i)
        sp.append(e.key, e.model_dump_json().encode())
    assert len(sp) == 3 and sp.dropped == 4
    assert [MemoryEvent.model_validate_json(p).summary for _, p in sp.peek()] == [
        "event 4", "event 5", "event 6"]
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_bounded_by_bytes(tmp_path: Path) -> None:
    sp = Spool(tmp_path, max_bytes=1000)
    for i in range(20):
        sp.append(f"k{i}", b"x" * 300)
    assert len(sp) == 3 and sp.size_bytes == 900 and sp.dropped == 17


def test_leftover_temp_files_are_ignored(tmp_path: Path) -> None:
    (tmp_path / ".tmp-0001-partial.json").write_bytes(b'{"half')
    sp = Spool(tmp_path)
    assert len(sp) == 0
    assert not list(tmp_path.glob(".tmp-*"))
