"""A database backend serving a worker runs at a lowered priority when it is a local process of
ours (`lower_local_peer`): recognised by its name and by holding the other end of one of our
connections, never by its pid alone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import psutil
import pytest
from totalrecall_worker.priority import lower_local_peer
from waiting import wait_for_sync

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")


def test_a_local_peer_is_lowered_only_when_it_serves_one_of_our_connections() -> None:
    # A local "server": a child that accepts one connection of ours and holds it.
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import socket, sys\n"
         "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
         "print(s.getsockname()[1], flush=True)\n"
         "c, _ = s.accept(); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        stranger_nice = os.getpriority(os.PRIO_PROCESS, child.pid)
        name = psutil_name(child.pid)
        # Not connected to us yet: left alone.
        assert not lower_local_peer(child.pid, stranger_nice + 3, name)
        with socket.create_connection(("127.0.0.1", port)):
            # Connected, but named otherwise: left alone.
            assert not lower_local_peer(child.pid, stranger_nice + 3, "postgres-not-this")
            assert os.getpriority(os.PRIO_PROCESS, child.pid) == stranger_nice
            # The other end of our connection, by its name: lowered.
            assert wait_lowered(child.pid, stranger_nice + 3, name)
            assert os.getpriority(os.PRIO_PROCESS, child.pid) == stranger_nice + 3
        assert not lower_local_peer(child.pid, 0, name)  # 0: never
    finally:
        child.kill()
        child.wait()


def psutil_name(pid: int) -> str:
    return psutil.Process(pid).name()


def wait_lowered(pid: int, nice: int, name: str) -> bool:
    """The child accepts our connection asynchronously: its end shows up within moments."""
    return wait_for_sync(lambda: lower_local_peer(pid, nice, name), timeout=10,
                         what=f"pid {pid}'s end of the connection lowered to nice {nice}")
