"""Text log files as a journal source: line classification, tailing across rotation, the watcher."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from totalrecall_schema import MemoryEvent, Severity
from totalrecall_watchers.adapters.journal import JournalWatcher
from totalrecall_watchers.adapters.log_tail import LogTail
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.journal import JournalParser
from totalrecall_watchers.core.log_files import line_priority, text_entry
from totalrecall_watchers.settings import JournalSettings
from waiting import wait_for


def test_line_priority_prefers_an_explicit_level() -> None:
    assert line_priority("2026-01-02 10:00:00 ERROR worker died") == 3
    assert line_priority("[WARN] disk slow") == 4
    assert line_priority('ts=1 level=error msg="db down"') == 3
    assert line_priority("INFO: retrying after error") == 6  # explicit level wins
    assert line_priority("CRITICAL: out of disk") == 2
    assert line_priority("EXT4-fs error (device sda1): bad block") == 3
    assert line_priority("Traceback (most recent call last):") == 3
    assert line_priority("connection failed after 3 attempts") == 3
    assert line_priority("this API is deprecated") == 4
    assert line_priority("all good, 0 problems") == 6


def test_text_entry_shapes() -> None:
    e = text_entry("Jan  2 03:04:05 box sshd[812]: error: kex_exchange_identification", "syslog")
    assert e == {"SYSLOG_IDENTIFIER": "sshd", "_PID": "812", "PRIORITY": 3, "_HOSTNAME": "box",
                 "MESSAGE": "error: kex_exchange_identification"}
    e = text_entry("2026-01-02T03:04:05.123+00:00 box kernel: [ 12.5] Out of memory: Killed "
                   "process 4521 (chrome)", "syslog")
    assert e is not None and e["_TRANSPORT"] == "kernel"
    assert e["MESSAGE"].startswith("Out of memory")
    e = text_entry("Jan  2 03:04:05 box systemd[1]: nginx.service: Failed with result "
                   "'exit-code'.", "syslog")
    assert e is not None and e["UNIT"] == "nginx.service"
    e = text_entry("2026-01-02 03:04:05,123 ERROR [db] pool exhausted", "myapp")
    assert e == {"SYSLOG_IDENTIFIER": "myapp", "MESSAGE": "ERROR [db] pool exhausted",
                 "PRIORITY": 3}
    e = text_entry('{"level": "warning", "msg": "slow query", "logger": "db"}', "myapp")
    assert e == {"MESSAGE": "slow query", "PRIORITY": 4, "SYSLOG_IDENTIFIER": "db"}
    assert text_entry("   \n", "x") is None


def test_parsed_lines_share_classification_and_dedup() -> None:
    clock = FakeClock()
    p = JournalParser(EventContext(clock=clock), dedup_window_s=300)

    def parse(line: str, app: bool = False) -> MemoryEvent | None:
        entry = text_entry(line, "myapp")
        assert entry is not None
        return p.parse_entry(entry, application=app, log_file="/var/log/x.log")

    ev = parse("2026-01-02 03:04:05 ERROR request 1234 failed password=hunter2", app=True)
    assert ev is not None and (ev.category, ev.subcategory) == ("error", "application")
    assert ev.severity == Severity.ERROR and "hunter2" not in ev.summary + ev.detail
    assert ev.metadata.model_extra["log_file"] == "/var/log/x.log"
    clock.advance(10)
    assert parse("2026-01-02 03:04:15 ERROR request 1234 failed password=hunter2", app=True) is None
    assert p.deduplicated == 1  # the same line again, ten seconds later
    assert parse("2026-01-02 03:04:16 ERROR request 5678 failed password=hunter2", app=True)
    assert p.deduplicated == 1  # another request: an event of its own
    assert parse("2026-01-02 03:04:05 INFO all fine", app=True) is None
    ev = parse("Jan  2 03:04:05 box systemd[1]: nginx.service: Failed with result 'exit-code'.")
    assert ev is not None and (ev.category, ev.subcategory) == ("system.service", "fail")
    assert ev.metadata.service == "nginx.service"
    ev = parse("Jan  2 03:04:05 box kernel: EXT4-fs error (device sda1): bad block")
    assert ev is not None and (ev.category, ev.subcategory) == ("error", "kernel")


def test_tail_starts_at_the_end_and_follows_rotation_and_truncation(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("old line 1\nold line 2\n")
    t = LogTail(log, application=True)
    t.prime()
    assert t.read_lines() == []  # history is not replayed
    with log.open("a") as f:
        f.write("new 1\npart")
    assert t.read_lines() == ["new 1"]
    with log.open("a") as f:
        f.write("ial\n")
    assert t.read_lines() == ["partial"]
    # rotation: the old file is moved away (its last lines still read), a new one starts
    with log.open("a") as f:
        f.write("last of old\n")
    os.rename(log, tmp_path / "app.log.1")
    log.write_text("first of new\n")
    assert t.read_lines() == ["last of old", "first of new"]
    assert t.rotations == 1
    # truncation (copytruncate)
    log.write_text("")
    assert t.read_lines() == []
    log.write_text("after truncate\n")
    assert t.read_lines() == ["after truncate"]
    # the file vanishes, then appears again: read from its start
    log.unlink()
    assert t.read_lines() == []
    log.write_text("reborn\n")
    assert t.read_lines() == ["reborn"]
    t.close()


def test_app_log_may_appear_later_but_a_missing_syslog_is_skipped(tmp_path: Path) -> None:
    s = JournalSettings(journald=False, log_files=[str(tmp_path / "later.log")],
                        syslog_files=[str(tmp_path / "no-syslog")])
    w = JournalWatcher(EventContext(), s)
    assert w.check_available() is None
    assert [str(t.path) for t in w.tails] == [str(tmp_path / "later.log")]
    assert w.note is not None and "no journald" in w.note
    w2 = JournalWatcher(EventContext(), JournalSettings(
        journald=False, log_files=[], syslog_files=[str(tmp_path / "no-syslog")]))
    reason = w2.check_available() or ""
    assert "journald disabled" in reason and "no log file" in reason


async def test_watcher_tails_files_without_journald(tmp_path: Path) -> None:
    app_log, syslog = tmp_path / "app.log", tmp_path / "syslog"
    app_log.write_text("2026-01-01 00:00:00 ERROR before the watcher started\n")
    syslog.write_text("")
    s = JournalSettings(journald=False, log_files=[str(app_log)], syslog_files=[str(syslog)],
                        log_poll_s=0.02)
    w = JournalWatcher(EventContext(clock=FakeClock()), s)
    assert w.check_available() is None and w.streaming
    got: list[MemoryEvent] = []

    async def emit(e: MemoryEvent) -> bool:
        got.append(e)
        return True

    stop = asyncio.Event()
    task = asyncio.create_task(w.run(emit, stop))
    with app_log.open("a") as f:
        f.write("2026-01-01 00:00:01 INFO fine\n2026-01-01 00:00:02 ERROR payment failed\n")
    with syslog.open("a") as f:
        f.write("Jan  1 00:00:03 box kernel: EXT4-fs error (device vdb): bad block\n")
    await wait_for(lambda: len(got) >= 2, timeout=10, interval=0.02, what="two log events",
                   context=lambda: f"got {got}")
    stop.set()
    await asyncio.wait_for(task, 10)
    w.close()
    assert sorted((e.category, e.subcategory, e.summary) for e in got) == [
        ("error", "application", "app: ERROR payment failed"),
        ("error", "kernel", "kernel: EXT4-fs error (device vdb): bad block")]
    assert w.stats()["log_lines"] == 3


def test_each_line_or_entry_is_its_own_hosts_event() -> None:
    """A journal or syslog file may gather other machines' entries: each names its host; this
    machine's keep its name and id (known by id, else by name: syslog gives the short name)."""
    ctx = EventContext(hostname="box.lan", machine_id="a" * 32, clock=FakeClock())
    p = JournalParser(ctx, dedup_window_s=0)

    def line(text: str) -> MemoryEvent:
        entry = text_entry(text, "syslog")
        assert entry is not None
        ev = p.parse_entry(entry)
        assert ev is not None
        return ev

    local = line("Jan  2 03:04:05 box sshd[812]: error: kex_exchange_identification")
    assert (local.metadata.host, local.metadata.machine_id) == ("box.lan", "a" * 32)
    remote = line("Jan  2 03:04:06 DB-01 postgres[90]: FATAL: could not open file")
    assert (remote.metadata.host, remote.metadata.machine_id) == ("db-01", None)
    p.window = 300.0  # the same message within the dedup window: once per host
    again = text_entry("Jan  2 03:04:07 db-02 postgres[91]: FATAL: could not open file", "s")
    assert again is not None and p.parse_entry(again) is not None
    assert p.parse_entry(again) is None
    p.window = 0.0
    app = line("2026-01-02T03:04:05+00:00 ERROR app.db: connection failed")  # no host there
    assert app.metadata.host == "box.lan"

    forwarded = p.parse_entry({"MESSAGE": "disk failure", "PRIORITY": "2",
                               "SYSLOG_IDENTIFIER": "smartd", "_HOSTNAME": "nas",
                               "_MACHINE_ID": "B" * 32})
    assert forwarded is not None
    assert (forwarded.metadata.host, forwarded.metadata.machine_id) == ("nas", "b" * 32)
    renamed = p.parse_entry({"MESSAGE": "disk failure", "PRIORITY": "2",
                             "SYSLOG_IDENTIFIER": "smartd", "_HOSTNAME": "old-name",
                             "_MACHINE_ID": "a" * 32})  # this machine under its former name
    assert renamed is not None
    assert (renamed.metadata.host, renamed.metadata.machine_id) == ("box.lan", "a" * 32)
