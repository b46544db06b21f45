"""The whole stack exactly as `make run` starts it: ingest → recall, a CPU hog → recall."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from stacklib import Api, wait_for


def test_ingested_event_comes_back_from_recall(stack: Api) -> None:
    marker = uuid.uuid4().hex[:8]
    r = stack.post("/memory/ingest", {
        "summary": f"postgresql.service failed to start: port 5432 already in use ({marker})",
        "detail": "Another postgres instance from a container held the port.",
        "category": "system.service", "metadata": {"severity": "error", "service": "postgresql"},
    })
    assert r.status_code == 200, r.text
    event_id = r.json()["ids"][0]
    hits = wait_for(lambda: [m for m in stack.recall("why did postgres fail to start?")
                             if m["id"] == event_id], 30, "the ingested event in recall")
    assert marker in hits[0]["summary"]
    block = stack.post("/memory/recall", {"query": "postgres port in use", "timeframe": "all"}).json()
    assert "<system_memory" in block["system_memory"] and marker in block["system_memory"]


def test_cpu_hungry_process_shows_up_in_recall(stack: Api, tmp_path: Path) -> None:
    # The hog runs under a name of its own (the kernel names a process after the file it was
    # started from), and the question names it, as a user asking about that program would. The
    # stack's own busy processes (pytest, npm, the services) raise a burst of near-identical
    # "python3 (PID n) using n% CPU" events on a slow machine, and "which process uses a lot of
    # CPU" alone ranks those among each other by chance.
    name = f"hog{uuid.uuid4().hex[:8]}"
    exe = tmp_path / name
    exe.symlink_to(sys.executable)
    hog = subprocess.Popen([str(exe), "-c", "while True: pass"])
    try:
        def found() -> list[dict[str, Any]]:
            return [m for m in stack.recall(f"is {name} using a lot of CPU?", category="system.process")
                    if str(hog.pid) in m["summary"] + m.get("detail", "")]

        hits = wait_for(found, 90, f"a high-CPU event for {name} (PID {hog.pid})", every=1.0)
        assert hits[0]["category"] == "system.process"
        assert hits[0]["subcategory"] == "high_cpu"
        assert name in hits[0]["summary"]
    finally:
        hog.kill()
        hog.wait()
