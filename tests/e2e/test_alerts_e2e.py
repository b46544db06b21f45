"""Proactive alerts on the real stack, as `make run` starts it.

* A filesystem really filling: a small tmpfs mounted where the stack's storage watcher looks
  (stacklib: `TR_WATCHERS_STORAGE__PATHS`, every second) is filled past 90 % and 95 %; the
  watcher's own reports go through NATS, the embedder and the indexer into Postgres, and the
  recall API raises `disk_filling` (in `GET /memory/alerts` and a greeting's block). Emptied,
  the watcher reports it back to normal and the alert resolves. Needs root (mount); skipped
  otherwise.
* A backup timer failing three nights running: systemd is not PID 1 here, so the timers and
  journal watchers' event code runs on fake `systemctl`/`journalctl` answers, and the events are
  ingested over HTTP into the same pipeline; a successful run resolves the alert.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from alert_events import as_ingest, journal_lines, timer_runs, unit_failed_entry
from stacklib import Api, wait_for

MiB = 1024 * 1024


def alerts(stack: Api, namespace: str, state: str = "open") -> dict[str, dict[str, Any]]:
    r = httpx.get(f"{stack.url}/memory/alerts", params={"namespace": namespace, "state": state},
                  headers=stack.headers, timeout=30)
    assert r.status_code == 200, r.text
    return {a["id"]: a for a in r.json()["alerts"]}


def greeting(stack: Api, namespace: str) -> dict[str, Any]:
    r = stack.post("/memory/recall", {"query": "good morning!", "namespace": namespace})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


@pytest.fixture
def small_fs(stack: Api) -> Iterator[Path]:
    if stack.storage_dir is None:
        pytest.skip("an external stack: its storage watcher does not look at our mount point")
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mnt = stack.storage_dir
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())


def test_a_filling_filesystem_raises_and_resolves_an_alert(stack: Api, small_fs: Path) -> None:
    alert_id = f"disk_filling:{small_fs}"
    fill(small_fs / "a.bin", int(7.5 * MiB))  # 93.75 %: the warning level
    warned = wait_for(lambda: alerts(stack, "default").get(alert_id), 90,
                      "the storage watcher's warning to raise an alert")
    assert warned["severity"] in ("warning", "critical") and warned["count"] >= 1
    assert f"{small_fs} at 9" in warned["text"]

    fill(small_fs / "b.bin", int(0.4 * MiB))  # 98.75 %: critical
    crit = wait_for(lambda: (a := alerts(stack, "default").get(alert_id)) and a["count"] >= 2
                    and a, 90, "the critical report to join the alert")
    assert crit["severity"] == "critical" and "rising" in crit["text"]
    assert crit["first_seen"] == warned["first_seen"]
    block = greeting(stack, "default")["system_memory"]
    assert "<system_alerts>" in block and str(small_fs) in block

    (small_fs / "a.bin").unlink()
    (small_fs / "b.bin").unlink()
    resolved = wait_for(lambda: (a := alerts(stack, "default", "all").get(alert_id))
                        and a["state"] == "resolved" and a, 90, "the alert to resolve")
    assert resolved["resolved_at"] and "back to" in resolved["text"]
    assert alert_id not in alerts(stack, "default")
    assert str(small_fs) not in greeting(stack, "default")["system_memory"]


def test_a_backup_timer_failing_three_nights_then_running_fine(stack: Api) -> None:
    ns = f"alerts-{uuid.uuid4().hex[:8]}"
    first = datetime.now(UTC) - timedelta(days=2, hours=1)
    runs = timer_runs([(first + timedelta(days=i), "exit-code") for i in range(3)]
                      + [(datetime.now(UTC) - timedelta(minutes=1), "success")])
    failures, success = runs[:3], runs[3]
    journal = journal_lines([(e.timestamp, unit_failed_entry("backup.service")) for e in failures])
    r = stack.post("/memory/ingest", [as_ingest(e, ns) for e in failures + journal])
    assert r.status_code == 200 and r.json()["accepted"] == 6, r.text

    found = wait_for(lambda: alerts(stack, ns).get("unit_failing:backup.service"), 90,
                     "the failing timer's alert")
    # Three failures, each reported by the timer and by the journal: counted once each.
    assert (found["count"], found["severity"], found["state"]) == (3, "error", "open")
    assert found["text"].startswith("backup.service failed 3 times since ")
    body = greeting(stack, ns)
    assert body["memories"] == [] and [a["id"] for a in body["alerts"]] == [
        "unit_failing:backup.service"]
    assert body["system_memory"].startswith("<system_alerts>")
    assert "backup.service failed 3 times" in body["system_memory"]

    assert stack.post("/memory/ingest", as_ingest(success, ns)).status_code == 200
    wait_for(lambda: "unit_failing:backup.service" not in alerts(stack, ns) or None, 90,
             "the alert to resolve after a good run")
    every = alerts(stack, ns, "all")
    assert every["unit_failing:backup.service"]["state"] == "resolved"
    assert greeting(stack, ns)["system_memory"] == ""
