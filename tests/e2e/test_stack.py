"""The whole stack exactly as `make run` starts it: ingest → recall, a CPU hog → recall, Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil
import pytest

from totalrecall.infra import free_port

T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, every: float = 0.25) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


class Stack:
    def __init__(self, proc: subprocess.Popen[str], api: str, log: Path) -> None:
        self.proc, self.api, self.log = proc, api, log

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.api + path, json=body, timeout=30)

    def recall(self, query: str, **kw: Any) -> list[dict[str, Any]]:
        r = self.post("/memory/recall", {"query": query, "timeframe": "all", "maxResults": 10, **kw})
        r.raise_for_status()
        return list(r.json()["memories"])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("e2e-home")
    ports = {name: free_port() for name in
             ("nats", "nats_monitor", "postgres", "api", "embedder", "indexer", "watchers")}
    env = {**os.environ, "TOTALRECALL_HOME": str(home), "TR_EMBEDDER_MODEL_PATH": str(model_path),
           # Fast watcher cadence so a CPU hog shows up within seconds.
           "TR_WATCHERS_PROCESS__INTERVAL_S": "1", "TR_WATCHERS_PROCESS__CPU_PERCENT": "40"}
    env.update({f"TOTALRECALL_{k.upper()}_PORT": str(v) for k, v in ports.items()})
    log = home / "supervisor.log"
    out = open(log, "w")  # noqa: SIM115
    totalrecall = Path(sys.executable).parent / "totalrecall"
    proc = subprocess.Popen([str(totalrecall), "run"], env=env, stdout=out, stderr=subprocess.STDOUT,
                            text=True)
    stack = Stack(proc, f"http://127.0.0.1:{ports['api']}", log)
    try:
        wait_for(lambda: "Total Recall is up" in log.read_text() or proc.poll() is not None,
                 240, "the stack to come up")
        assert proc.poll() is None, log.read_text()
        yield stack
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        out.close()


def test_ingested_event_comes_back_from_recall(stack: Stack) -> None:
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


def test_cpu_hungry_process_shows_up_in_recall(stack: Stack) -> None:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        def found() -> list[dict[str, Any]]:
            return [m for m in stack.recall("process using a lot of CPU", category="system.process")
                    if str(hog.pid) in m["summary"] + m.get("detail", "")]

        hits = wait_for(found, 90, f"a high-CPU event for PID {hog.pid}", every=1.0)
        assert hits[0]["category"] == "system.process"
    finally:
        hog.kill()
        hog.wait()


def test_crashed_service_is_restarted(stack: Stack) -> None:
    def embedder() -> psutil.Process | None:
        for child in psutil.Process(stack.proc.pid).children(recursive=True):
            try:
                if "totalrecall_embedder" in " ".join(child.cmdline()):
                    return child
            except psutil.NoSuchProcess:
                continue
        return None

    first = wait_for(embedder, 10, "the embedder process")
    first.kill()  # kill -9: no chance to clean up
    second = wait_for(lambda: (e := embedder()) and e.pid != first.pid and e, 30,
                      "the supervisor to restart the embedder")
    assert second.is_running()
    marker = uuid.uuid4().hex[:8]
    r = stack.post("/memory/ingest", {"summary": f"disk /home at 93% after the restart {marker}",
                                      "category": "system.storage"})
    assert r.status_code == 200, r.text
    wait_for(lambda: any(marker in m["summary"] for m in stack.recall("disk space on /home")), 60,
             "an event ingested after the restart")


def test_ctrl_c_leaves_nothing_running(stack: Stack) -> None:
    children = psutil.Process(stack.proc.pid).children(recursive=True)
    names = {c.name() for c in children}
    assert any("nats-server" in n for n in names) and any("postgres" in n for n in names), names
    assert len(children) >= 6
    stack.proc.send_signal(signal.SIGINT)
    assert stack.proc.wait(60) == 0
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left running after Ctrl-C: {[p.pid for p in alive]}"
