"""Error lines written to real log files → `error/*` events on the real stream (no journald here).

A real process logs through Python's `logging` into an application log; a syslog-format file gets
a kernel error line. Info lines are skipped, repeated errors deduplicated, secrets scrubbed.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from totalrecall_schema import Severity, Topology
from watchers_it_helpers import StreamReader, make_settings, running, wait_until


def log_from_a_real_process(log: Path, level: str, message: str) -> None:
    code = ("import logging, sys\n"
            f"logging.basicConfig(filename={str(log)!r}, "
            "format='%(asctime)s %(levelname)s [%(name)s] %(message)s', level=logging.INFO)\n"
            f"logging.getLogger('billing').{level}(sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", code, message], check=True, timeout=30)


async def test_error_lines_in_log_files_arrive(nats_url: str, topology: Topology, tr_home: Path,
                                               tmp_path: Path, reader: StreamReader) -> None:
    app_log, syslog = tmp_path / "billing.log", tmp_path / "syslog"
    syslog.write_text("Jan  1 00:00:00 box kernel: EXT4-fs error (device vdb): old history\n")
    settings = make_settings(nats_url, topology, tr_home, enable=("journal",))
    settings.journal.journald = False
    settings.journal.log_files = [str(app_log)]  # does not exist yet: appears when logged to
    settings.journal.syslog_files = [str(syslog)]
    settings.journal.log_poll_s = 0.1
    marker = uuid.uuid4().hex[:8]
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["journal"].state == "running", 10, "journal")
        assert "no journald" in (runner.health()["journal"].get("note") or "")

        log_from_a_real_process(app_log, "info", f"invoice {marker} sent")
        log_from_a_real_process(
            app_log, "error", f"charge {marker} failed for order 1234: card declined "
            "(api_key=sk_live_4eC39HqLyjWDarjtT1zdp7dc)")
        ev, _ = await reader.wait_for(
            lambda e: e.category == "error" and marker in e.summary, 15, "the app's error line")
        assert ev.subcategory == "application" and ev.severity == Severity.ERROR
        assert ev.summary.startswith(f"billing: ERROR [billing] charge {marker} failed")
        assert ev.source == "watcher.journal"
        extra = ev.metadata.model_extra or {}
        assert extra["log_file"] == str(app_log) and extra["priority"] == 3
        assert "sk_live_4eC39HqLyjWDarjtT1zdp7dc" not in ev.summary + ev.detail

        log_from_a_real_process(  # the same error again (only its time differs): deduplicated
            app_log, "error", f"charge {marker} failed for order 1234: card declined "
            "(api_key=sk_live_4eC39HqLyjWDarjtT1zdp7dc)")
        log_from_a_real_process(  # another order: an event of its own
            app_log, "error", f"charge {marker} failed for order 5678: card declined "
            "(api_key=sk_live_4eC39HqLyjWDarjtT1zdp7dc)")
        await reader.wait_for(lambda e: "order 5678" in e.summary, 15, "the other order's line")
        with syslog.open("a") as f:
            f.write(f"Jan  1 00:00:05 box kernel: [ 42.1] EXT4-fs error (device vdb{marker}): "
                    "bad block bitmap\n")
        ev, _ = await reader.wait_for(
            lambda e: e.subcategory == "kernel" and marker in e.summary, 15, "the kernel line")
        assert ev.category == "error" and ev.summary.startswith("kernel: EXT4-fs error")
        assert ev.metadata.model_extra["log_file"] == str(syslog)
        await wait_until(lambda: app.state.runner.watchers[0].parser.deduplicated >= 1, 10,
                         "the repeated error to be deduplicated")
    summaries = [e.summary for e in await reader.events()]
    charges = [s for s in summaries if f"charge {marker}" in s]
    assert len(charges) == 2 and "order 5678" in charges[1], summaries
    assert not any("invoice" in s or "old history" in s for s in summaries), summaries
