"""Who changed a file: fanotify's event records parsed, and a file event naming its writer."""

from __future__ import annotations

import struct
import time
from pathlib import Path

from totalrecall_watchers.adapters.filesystem import FileChangeTracker
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.file_actors import (
    FAN_CLOSE_WRITE,
    FAN_MODIFY,
    FAN_Q_OVERFLOW,
    Writer,
    parse_events,
)
from totalrecall_watchers.core.filesystem import PathFilter

META = struct.Struct("=IBBHQii")


def _record(mask: int, fd: int, pid: int, pad: int = 0) -> bytes:
    return META.pack(META.size + pad, 3, 0, META.size, mask, fd, pid) + b"\0" * pad


def test_a_read_of_several_records_is_split() -> None:
    buf = _record(FAN_MODIFY, 7, 100) + _record(FAN_CLOSE_WRITE, 8, 101, pad=8) + \
        _record(FAN_Q_OVERFLOW, -1, 0)
    assert parse_events(buf) == [(FAN_MODIFY, 7, 100), (FAN_CLOSE_WRITE, 8, 101),
                                 (FAN_Q_OVERFLOW, -1, 0)]
    assert parse_events(buf[:10]) == []  # a truncated record is not read
    wrong_version = META.pack(META.size, 2, 0, META.size, FAN_MODIFY, 3, 1)
    assert parse_events(wrong_version) == []


class Known:
    def __init__(self, writers: dict[str, Writer]) -> None:
        self.writers = writers
        self.marked: list[str] = []

    def writer_of(self, path: str) -> Writer | None:
        return self.writers.get(path)

    def mark(self, directory: str) -> bool:
        self.marked.append(directory)
        return True


def test_a_file_event_names_its_writer(tmp_path: Path) -> None:
    conf = tmp_path / "nginx.conf"
    conf.write_text("worker_processes 4;\n")
    vim = Writer(pid=4242, name="vim", user="alice", cmdline="vim /etc/nginx/nginx.conf",
                 at=time.monotonic())
    known = Known({str(conf): vim})
    tracker = FileChangeTracker(EventContext(hostname="ws", clock=FakeClock()),
                                PathFilter([], []), 60.0, actors=known)  # type: ignore[arg-type]
    [ev] = tracker.batch({(2, str(conf))})
    assert ev.summary == f"Modified {conf} by vim (pid 4242, user alice)"
    assert "command: vim /etc/nginx/nginx.conf" in ev.detail
    assert (ev.metadata.model_extra or {})["changed_by"] == {
        "pid": 4242, "process": "vim", "user": "alice", "command": "vim /etc/nginx/nginx.conf"}
    new_dir = tmp_path / "sites"
    new_dir.mkdir()
    tracker.batch({(1, str(new_dir))})
    assert known.marked == [str(new_dir)]  # a new directory's files are watched for writers


def test_a_deletion_names_no_writer(tmp_path: Path) -> None:
    gone = str(tmp_path / "old.conf")
    known = Known({gone: Writer(1, "rm", "root", "rm old.conf", time.monotonic())})
    tracker = FileChangeTracker(EventContext(hostname="ws", clock=FakeClock()),
                                PathFilter([], []), 60.0, actors=known)  # type: ignore[arg-type]
    [ev] = tracker.batch({(3, gone)})
    assert ev.summary == f"Deleted {gone}" and "changed_by" not in (ev.metadata.model_extra or {})
