"""A real systemd journal, followed by the real journalctl: entries appended while the watchers
run become events on the real stream, the journal's to the journal watcher and the auth
facility's to the security watcher.

This machine has no journald. The journal is written the way a log collector writes one:
`systemd-journal-remote` turns entries in the journal export format into a journal file and
appends to it (journalctl follows it as it would journald's). Its `_MACHINE_ID` is not this
machine's, as with a host's journal mounted in a container: the watchers read it with `--merge`.
`make bootstrap` installs `systemd-journal-remote` on Debian.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from totalrecall_schema import Severity, Topology
from totalrecall_watchers.adapters.journal import journal_command
from watchers_it_helpers import StreamReader, make_settings, running, wait_until

REMOTE = next((p for p in ("/lib/systemd/systemd-journal-remote",
                           "/usr/lib/systemd/systemd-journal-remote")
               if Path(p).is_file()), shutil.which("systemd-journal-remote"))
pytestmark = pytest.mark.skipif(
    REMOTE is None or shutil.which("journalctl") is None,
    reason="needs journalctl and systemd-journal-remote (`make bootstrap` installs them)")


def append(journal: Path, **fields: str) -> None:
    """One entry, in the journal export format, appended to `journal` (created if new)."""
    entry = {"__REALTIME_TIMESTAMP": str(time.time_ns() // 1000),
             "_BOOT_ID": "0123456789abcdef0123456789abcdef",
             "_MACHINE_ID": "fedcba9876543210fedcba9876543210", "_HOSTNAME": "journal-host",
             **fields}
    text = "".join(f"{k}={v}\n" for k, v in entry.items()) + "\n"
    assert REMOTE is not None
    subprocess.run([REMOTE, f"--output={journal}", "-"], input=text.encode(), check=True,
                   capture_output=True, timeout=30)


async def test_entries_appended_to_a_real_journal_arrive(
        nats_url: str, topology: Topology, tr_home: Path, tmp_path: Path,
        reader: StreamReader) -> None:
    jdir = tmp_path / "journal"
    jdir.mkdir()
    journal = jdir / "remote.journal"
    marker = uuid.uuid4().hex[:8]
    append(journal, PRIORITY="3", SYSLOG_IDENTIFIER="backupd", _PID="4100",
           _SYSTEMD_UNIT="backupd.service", MESSAGE=f"old failure {marker} before the watch")

    # Which journals: this directory (journalctl reads the machine's own by default; a
    # container is given the host's with --merge, measured in `make compose-smoke`).
    follow = ["journalctl", f"--directory={jdir}", "--follow", "--output=json", "--lines=0"]
    assert journal_command(follow) == follow  # a chosen directory is read as chosen
    settings = make_settings(nats_url, topology, tr_home, enable=("journal", "security"))
    settings.journal.command = [*follow, "--priority=warning"]
    settings.journal.skip_availability_check = True
    settings.journal.syslog_files = []
    settings.security.command = [*follow, "SYSLOG_FACILITY=4", "SYSLOG_FACILITY=10"]
    settings.security.skip_availability_check = True
    settings.security.log_files = []
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["journal"].state == "running"
                         and runner.status["security"].state == "running", 15, "both watchers")
        # journalctl --follow --lines=0 starts at the end: what is appended from now on. It
        # may not have opened the file yet when the watchers say running, so the entry is
        # appended again (another PID: not a repeat) until one arrives.
        deadline = time.monotonic() + 30
        pid = 4200
        while True:
            append(journal, PRIORITY="3", SYSLOG_IDENTIFIER="backupd", _PID=str(pid),
                   _SYSTEMD_UNIT="backupd.service",
                   MESSAGE=f"upload {marker} failed: connection reset by peer")
            try:
                ev, _ = await reader.wait_for(
                    lambda e: marker in e.summary and "upload" in e.summary, 2, "the error")
                break
            except (AssertionError, TimeoutError):
                pid += 1
                assert time.monotonic() < deadline, "no entry of the journal arrived in 30 s"
        assert ev.source == "watcher.journal" and ev.severity == Severity.ERROR
        assert ev.summary == f"backupd: upload {marker} failed: connection reset by peer"
        assert ev.metadata.service == "backupd.service"
        assert ev.metadata.host == "journal-host"  # the journal's machine, not this one
        assert not any("before the watch" in e.summary for e, _ in reader.seen)

        append(journal, PRIORITY="5", SYSLOG_IDENTIFIER="sudo", SYSLOG_FACILITY="10",
               _PID="4300", MESSAGE=f"   alice : TTY=pts/0 ; PWD=/home/alice ; USER=root ; "
                                    f"COMMAND=/usr/bin/systemctl restart backup-{marker}")
        sec, _ = await reader.wait_for(
            lambda e: e.source == "watcher.security" and marker in e.detail + e.summary, 15,
            "the sudo entry")
        assert "alice" in sec.summary and sec.metadata.host == "journal-host"
        assert not any(e.source == "watcher.journal" and f"backup-{marker}" in e.summary
                       for e, _ in reader.seen)  # the auth line is the security watcher's
