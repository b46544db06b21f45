from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from totalrecall_schema import MemoryEvent, Severity
from totalrecall_watchers.adapters.journal import JournalWatcher, journal_command, journald_reason
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.journal import JournalParser, normalise
from totalrecall_watchers.settings import JournalSettings
from waiting import wait_for


def line(msg: str, prio: int = 3, **fields: str) -> str:
    return json.dumps({"MESSAGE": msg, "PRIORITY": str(prio), **fields})


def test_info_is_skipped_errors_and_warnings_kept() -> None:
    p = JournalParser(EventContext(clock=FakeClock()))
    assert p.parse(line("Started session 4", prio=6)) is None
    assert p.parse(line("debug chatter", prio=7)) is None
    warn = p.parse(line("disk almost full", prio=4, SYSLOG_IDENTIFIER="smartd"))
    err = p.parse(line("segfault in worker", prio=3, _SYSTEMD_UNIT="app.service",
                       SYSLOG_IDENTIFIER="app"))
    assert warn is not None and warn.severity == Severity.WARNING
    assert (warn.category, warn.subcategory) == ("error", "system")
    assert err is not None and err.severity == Severity.ERROR
    assert err.summary == "app: segfault in worker" and err.metadata.service == "app.service"
    assert p.skipped == 2


def test_unit_failure_becomes_service_fail() -> None:
    p = JournalParser(EventContext(clock=FakeClock()))
    e = p.parse(line("postgresql.service: Failed with result 'exit-code'.", prio=4,
                     SYSLOG_IDENTIFIER="systemd", UNIT="postgresql.service",
                     _SYSTEMD_UNIT="init.scope", _PID="1"))
    assert e is not None
    assert (e.category, e.subcategory) == ("system.service", "fail")
    assert e.metadata.service == "postgresql.service" and e.severity == Severity.ERROR
    assert e.summary.startswith("postgresql.service: ")


def test_kernel_messages() -> None:
    p = JournalParser(EventContext(clock=FakeClock()))
    e = p.parse(line("Out of memory: Killed process 4521 (chrome) total-vm:4200000kB", prio=3,
                     _TRANSPORT="kernel"))
    assert e is not None and (e.category, e.subcategory) == ("system.process", "oom_kill")
    assert e.summary == "chrome (PID 4521) killed by the kernel OOM killer"
    assert e.metadata.model_extra["pid"] == 4521
    e = p.parse(line("EXT4-fs error (device sda1): bad block", prio=3, _TRANSPORT="kernel"))
    assert e is not None and (e.category, e.subcategory) == ("error", "kernel")


def test_identical_messages_deduplicated_within_window() -> None:
    clock = FakeClock()
    p = JournalParser(EventContext(clock=clock), dedup_window_s=300)
    msg = "{ts} connection to 10.0.0.1 port 100 failed (req 0x1abcdef)"
    first = p.parse(line(msg.format(ts="2026-05-01T12:00:01Z"), SYSLOG_IDENTIFIER="app"))
    assert first is not None
    for n in range(2, 50):
        clock.advance(5)
        stamp = f"2026-05-01T12:{n:02d}:00Z"
        assert p.parse(line(msg.format(ts=stamp), SYSLOG_IDENTIFIER="app")) is None
    assert p.deduplicated == 48
    # other unit: not a duplicate
    assert p.parse(line(msg.format(ts="x"), SYSLOG_IDENTIFIER="other")) is not None
    clock.advance(301)
    assert p.parse(line(msg.format(ts="y"), SYSLOG_IDENTIFIER="app")) is not None


def test_messages_differing_in_an_identifier_are_all_kept() -> None:
    """Which addresses attacked, which user: every failed login is an event of its own."""
    clock = FakeClock()
    p = JournalParser(EventContext(clock=clock), dedup_window_s=300)
    seen = []
    for n in range(1, 20):
        clock.advance(1)
        e = p.parse(line(f"Failed password for root from 183.62.140.{n} port 4{n:04d} ssh2",
                         SYSLOG_IDENTIFIER="sshd"))
        assert e is not None
        seen.append(e.summary)
    assert p.deduplicated == 0 and len(set(seen)) == 19


def test_normalise_and_bad_input() -> None:
    assert normalise("2026-05-01T12:00:01Z  PID 1234 failed at 12:00:02.5") \
        == "<ts> PID 1234 failed at <time>"
    p = JournalParser(EventContext(clock=FakeClock()))
    assert p.parse("not json") is None and p.parse("[1,2]") is None
    assert p.parse_errors == 2
    # binary MESSAGE as a byte array
    e = p.parse(json.dumps({"MESSAGE": list(b"binary \xff boom"), "PRIORITY": 3}))
    assert e is not None and "binary" in e.summary


async def test_watcher_follows_a_command(tmp_path: Path) -> None:
    script = tmp_path / "fake_journalctl.py"
    entries = [line("worker crashed", 3, SYSLOG_IDENTIFIER="w"), line("fine", 6),
               line("worker crashed", 3, SYSLOG_IDENTIFIER="w"),
               line("disk slow", 4, SYSLOG_IDENTIFIER="d")]
    script.write_text("import sys, time\n" + "".join(
        f"print({e!r}, flush=True)\n" for e in entries) + "time.sleep(60)\n")
    settings = JournalSettings(command=[sys.executable, str(script)],
                               skip_availability_check=True)
    w = JournalWatcher(EventContext(clock=FakeClock()), settings)
    assert w.check_available() is None and w.streaming
    got: list[MemoryEvent] = []

    async def emit(e: MemoryEvent) -> bool:
        got.append(e)
        return True

    stop = asyncio.Event()
    task = asyncio.create_task(w.run(emit, stop))
    await wait_for(lambda: len(got) >= 2, timeout=10, what="two journal events",
                   context=lambda: f"got {got}")
    stop.set()
    await asyncio.wait_for(task, 10)
    assert [e.summary for e in got] == ["w: worker crashed", "d: disk slow"]
    assert w.stats()["deduplicated"] == 1


def test_missing_journal_is_unavailable(tmp_path: Path) -> None:
    w = JournalWatcher(EventContext(), JournalSettings(command=["no-such-journalctl-binary"],
                                                       syslog_files=[]))
    assert "not found" in (w.check_available() or "")


def _journal(root: Path, machine: str) -> Path:
    (root / machine).mkdir(parents=True)
    f = root / machine / "system.journal"
    f.write_bytes(b"LPKSHHRH")
    return f


def test_journals_nobody_may_read_are_named_with_their_group(tmp_path: Path) -> None:
    """journalctl follows nothing, silently, when it may not read a journal: the watcher says
    so, and which group would let it (a container's user is not in the host's systemd-journal)."""
    f = _journal(tmp_path / "journal", "a" * 32)
    sh = [sys.executable]  # any command on PATH: the journal check is what is tested
    reason = journald_reason(True, sh, dirs=[tmp_path / "journal"], readable=lambda p: False)
    assert reason is not None and "not readable" in reason
    assert str(f) in reason and f"JOURNAL_GID={f.stat().st_gid}" in reason
    assert journald_reason(True, sh, dirs=[tmp_path / "journal"], readable=lambda p: True) is None


def test_a_journal_directory_nobody_may_list_is_not_no_journal(tmp_path: Path) -> None:
    root = tmp_path / "journal"
    (root / ("b" * 32)).mkdir(parents=True)  # its files hidden: listed by nobody
    reason = journald_reason(True, [sys.executable], dirs=[root],
                             readable=lambda p: p.name != "b" * 32)
    assert reason is not None and "not readable" in reason and "b" * 32 in reason
    # the journal directory itself unlisted (a copy of a host's, owned by its group alone)
    reason = journald_reason(True, [sys.executable], dirs=[root],
                             readable=lambda p: p != root)
    assert reason is not None and "not readable" in reason and f"({root})" in reason
    empty = journald_reason(True, [sys.executable], dirs=[tmp_path / "none"])
    assert empty is not None and empty.startswith("no systemd journal")


def test_another_machines_journal_is_read_with_merge(tmp_path: Path) -> None:
    """A container reading the host's journal: journalctl reads only the journals of its own
    machine id by default, which the host's are not."""
    root, mid = tmp_path / "journal", tmp_path / "machine-id"
    _journal(root, "c" * 32)
    cmd = ["journalctl", "--follow", "--output=json"]
    assert journal_command(cmd, dirs=[root], machine_id=mid) == [
        "journalctl", "--merge", "--follow", "--output=json"]  # no machine id at all
    mid.write_text("d" * 32 + "\n")
    assert journal_command(cmd, dirs=[root], machine_id=mid)[1] == "--merge"  # another one's
    mid.write_text("c" * 32 + "\n")
    assert journal_command(cmd, dirs=[root], machine_id=mid) == cmd  # this machine's own
    mid.unlink()
    chosen = ["journalctl", "--directory=/srv/j", "--follow"]
    assert journal_command(chosen, dirs=[root], machine_id=mid) == chosen
    assert journal_command(["/usr/bin/journalctl", "-D", "/srv/j"], dirs=[root],
                           machine_id=mid) == ["/usr/bin/journalctl", "-D", "/srv/j"]
    assert journal_command(["my-follower"], dirs=[root], machine_id=mid) == ["my-follower"]
