"""`make run`'s supervisor: a crashed service comes back; Ctrl-C leaves nothing running.

This module starts its own stack, since it kills things."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from stacklib import Api, launch_stack, wait_for


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Iterator[Api]:
    with launch_stack(tmp_path_factory.mktemp("supervisor-home"), model_path) as api:
        assert api.proc is not None
        yield api


def _service(api: Api, module: str) -> psutil.Process | None:
    assert api.proc is not None
    for child in psutil.Process(api.proc.pid).children(recursive=True):
        try:
            if module in " ".join(child.cmdline()):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def test_crashed_service_is_restarted(own_stack: Api) -> None:
    first = wait_for(lambda: _service(own_stack, "totalrecall_embedder"), 10, "the embedder")
    first.kill()  # kill -9: no chance to clean up
    wait_for(lambda: (e := _service(own_stack, "totalrecall_embedder")) and e.pid != first.pid,
             30, "the supervisor to restart the embedder")
    marker = uuid.uuid4().hex[:8]
    r = own_stack.post("/memory/ingest", {"summary": f"disk /home at 93% after restart {marker}",
                                          "category": "system.storage"})
    assert r.status_code == 200, r.text
    own_stack.wait_recallable("disk space on /home", marker)


def test_ctrl_c_leaves_nothing_running(own_stack: Api) -> None:
    assert own_stack.proc is not None
    children = psutil.Process(own_stack.proc.pid).children(recursive=True)
    names = {c.name() for c in children}
    assert any("nats-server" in n for n in names) and any("postgres" in n for n in names), names
    assert len(children) >= 6
    own_stack.proc.send_signal(signal.SIGINT)
    assert own_stack.proc.wait(60) == 0
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left running after Ctrl-C: {[p.pid for p in alive]}"
