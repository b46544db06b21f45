"""Who changed a file, from the kernel: a child process (its own command line) writes into a
watched tree, and the file event on the real stream names its pid, user and command (fanotify,
root only; skipped elsewhere with the reason)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from totalrecall_schema import Topology
from watchers_it_helpers import StreamReader, make_settings, running, wait_until, watch_started

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="fanotify needs root (CAP_SYS_ADMIN)")


async def test_a_file_event_names_the_process_that_wrote_it(
        nats_url: str, topology: Topology, tr_home: Path, tmp_path: Path,
        reader: StreamReader) -> None:
    watched = tmp_path / "etc-like"
    (watched / "nginx").mkdir(parents=True)
    conf = watched / "nginx" / "nginx.conf"
    conf.write_text("worker_processes 2;\n")
    settings = make_settings(nats_url, topology, tr_home, enable=("filesystem",))
    settings.filesystem.paths = [str(watched)]
    settings.filesystem.debounce_ms = 100
    marker = f"edit-{uuid.uuid4().hex[:8]}"
    # As an editor does: the file written and flushed, the process still there a moment after.
    script = ("import sys, time\n"
              f"f = open({str(conf)!r}, 'a')\n"
              "f.write('# ' + sys.argv[1] + chr(10)); f.flush(); time.sleep(1.0); f.close()\n")
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["filesystem"].state == "running", 10, "watcher")
        await wait_until(lambda: app.state.publisher.connected, 10, "NATS")
        await watch_started(reader, watched)  # fanotify marks are set before inotify's watches
        child = subprocess.Popen([sys.executable, "-c", script, marker])
        ev, _ = await reader.wait_for(
            lambda e: e.category == "file" and e.metadata.path == str(conf)
            and "changed_by" in (e.metadata.model_extra or {}), 20, "a file event with its writer")
        assert child.wait(10) == 0
    by = (ev.metadata.model_extra or {})["changed_by"]
    assert by["pid"] == child.pid and by["user"] == "root"
    assert marker in by["command"] and "python" in by["process"]
    assert f"by {by['process']} (pid {child.pid}, user root)" in ev.summary
    assert "command: " in ev.detail and marker in ev.detail
