"""Real things happen on this machine → the watchers see them → recall finds them (whole stack).

A file written and deleted under a watched directory, an error line logged by a real process, a
CPU hog killed with SIGKILL. (The CPU hog alone: tests/e2e/test_stack.py.)
"""

from __future__ import annotations

import os
import random
import signal
import string
import subprocess
import sys
from typing import Any

import pytest
from stacklib import Api, wait_for
from totalrecall_watchers.adapters.proc_connector import can_listen


def _marker() -> str:
    """Letters only: the embedder folds memories whose text differs only in numbers or hex ids
    within 5 minutes (two identical CPU hogs are one memory seen twice)."""
    return "".join(random.choices(string.ascii_lowercase, k=10))


def _hits(stack: Api, query: str, marker: str, **kw: Any) -> list[dict[str, Any]]:
    return [m for m in stack.recall(query, **kw) if marker in m["summary"] + m.get("detail", "")]


def test_file_written_and_deleted_under_a_watched_path(stack: Api) -> None:
    if stack.watched_dir is None:
        pytest.skip("an external stack: no watched directory of ours")
    marker = _marker()
    target = stack.watched_dir / f"nginx-{marker}.conf"
    target.write_text("server { listen 8080; }\n")
    hit = stack.wait_recallable(f"which file was created: nginx-{marker}.conf", str(target),
                                timeout=60, category="file")
    assert (hit["category"], hit["subcategory"]) == ("file", "create")
    assert hit["summary"].startswith(f"Created {target}")
    if os.geteuid() == 0:  # as root the watcher learns from the kernel who wrote it: this test
        assert hit["metadata"]["changed_by"]["pid"] == os.getpid()
        assert hit["summary"] == f"Created {target} by {hit['metadata']['changed_by']['process']}" \
            f" (pid {os.getpid()}, user root)"
    target.unlink()
    hits = wait_for(lambda: [m for m in _hits(stack, f"deleted file nginx-{marker}.conf",
                                              str(target), category="file")
                             if m["subcategory"] == "delete"], 60, "the delete in recall")
    assert hits[0]["summary"] == f"Deleted {target}"


def test_error_logged_by_a_real_process(stack: Api) -> None:
    if stack.app_log is None:
        pytest.skip("an external stack: no application log of ours")
    marker = _marker()
    code = ("import logging, sys\n"
            f"logging.basicConfig(filename={str(stack.app_log)!r}, "
            "format='%(asctime)s %(levelname)s %(message)s')\n"
            "logging.error(sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", code,
                    f"payment gateway timeout {marker}: upstream returned 504"],
                   check=True, timeout=30)
    hit = stack.wait_recallable("payment gateway error", marker, timeout=60, category="error")
    assert (hit["category"], hit["subcategory"]) == ("error", "application")
    assert f"ERROR payment gateway timeout {marker}" in hit["summary"]


def test_cpu_hog_killed_by_a_signal(stack: Api) -> None:
    marker = _marker()
    hog = subprocess.Popen([sys.executable, "-c", f"while True: pass  # {marker}"])
    pid = str(hog.pid)
    try:
        # PID and marker in the query: earlier tests' hogs read alike and rank beside this one.
        wait_for(lambda: [m for m in _hits(stack, f"process {pid} {marker} using a lot of CPU",
                                           f"PID {pid})", category="system.process")
                          if m["subcategory"] == "high_cpu"], 90, f"high_cpu of {pid}", every=1.0)
    finally:
        hog.send_signal(signal.SIGKILL)
        hog.wait()
    ended = ("crash",) if can_listen() else ("crash", "exit")
    hits = wait_for(lambda: [m for m in _hits(stack, f"process {pid} {marker} killed",
                                              f"PID {pid})", category="system.process")
                             if m["subcategory"] in ended], 60, f"the end of {pid}", every=1.0)
    if ended == ("crash",):
        assert "killed by SIGKILL" in hits[0]["summary"]
