"""How a process ended: its wait status, for processes that are not children of the watcher.

Two sources, both optional:

* the kernel's process-events connector (netlink `NETLINK_CONNECTOR`/`CN_IDX_PROC`, needs root or
  CAP_NET_ADMIN): a background thread records the wait status of every process that exits, so a
  tracked process that is gone by the next poll still has one;
* a zombie's `/proc/<pid>/stat` (field 52, Linux ≥ 3.5): readable until its parent reaps it.

A wait status is the `waitpid(2)` form: low 7 bits the signal, 0x80 the core flag, bits 8–15 the
exit code (decoded by `core/procexit.py`'s `ExitStatus`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import struct
import threading
import time
from collections import OrderedDict

log = logging.getLogger(__name__)

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
PROC_CN_MCAST_IGNORE = 2
PROC_EVENT_EXIT = 0x80000000
NLMSG_HDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
CN_MSG = struct.Struct("=IIIIHH")  # idx, val, seq, ack, len, flags
PROC_EVENT_HDR = struct.Struct("=IIQ")  # what, cpu, timestamp_ns
EXIT_EVENT = struct.Struct("=IIII")  # pid, tgid, exit_code (wait status), exit_signal
NLMSG_DONE = 3
MAX_EXITS = 8192
#: Every fork/exec/exit of the machine arrives here: a large buffer rides out bursts (builds).
RCVBUF = 8 * 1024 * 1024
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def zombie_exit_status(pid: int, proc: str = "/proc") -> int | None:
    """The wait status of a zombie from `/proc/<pid>/stat` (None if unreadable)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            raw = f.read().decode("utf-8", "replace")
        fields = raw[raw.rindex(")") + 2:].split()  # fields from #3 (state) on
        if fields[0] != "Z" or len(fields) < 50:
            return None
        return int(fields[49])  # field 52: exit_code
    except (OSError, ValueError, IndexError):
        return None


class ProcConnectorExits:
    """Listens to the kernel's process-exit events in a daemon thread; `lookup(pid)` returns the
    wait status of a process that exited recently (bounded memory)."""

    def __init__(self, max_entries: int = MAX_EXITS) -> None:
        self.max_entries = max_entries
        self._exits: OrderedDict[int, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.error: str | None = None
        self.received = 0
        #: Times the kernel dropped events because we read too slowly (ENOBUFS).
        self.overruns = 0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> bool:
        """Subscribe; False (reason in `error`) when the kernel or permissions do not allow it."""
        if self.running:
            return True
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        except (OSError, AttributeError) as exc:
            self.error = f"no process connector: {exc}"
            return False
        try:
            for opt in (SO_RCVBUFFORCE, socket.SO_RCVBUF):  # FORCE needs CAP_NET_ADMIN
                try:
                    sock.setsockopt(socket.SOL_SOCKET, opt, RCVBUF)
                    break
                except OSError:
                    continue
            sock.bind((0, CN_IDX_PROC))  # 0: the kernel assigns the port id
            sock.send(self._control(sock, PROC_CN_MCAST_LISTEN))
            sock.settimeout(0.2)
        except OSError as exc:
            sock.close()
            self.error = f"process connector not permitted: {exc}"
            return False
        self._sock = sock
        self._stop.clear()
        self.error = None
        self._thread = threading.Thread(target=self._loop, name="proc-connector", daemon=True)
        self._thread.start()
        return True

    @staticmethod
    def _control(sock: socket.socket, op: int) -> bytes:
        payload = struct.pack("=I", op)
        cn = CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(payload), 0) + payload
        port = sock.getsockname()[0]
        return NLMSG_HDR.pack(NLMSG_HDR.size + len(cn), NLMSG_DONE, 0, 0, port) + cn

    def _loop(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._stop.is_set():
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # events lost in a burst; the socket still works
                    self.overruns += 1
                    continue
                if not self._stop.is_set():
                    self.error = f"process connector failed: {exc}"
                    log.warning("%s", self.error)
                return
            self._parse(data)

    def _parse(self, data: bytes) -> None:
        off = 0
        while off + NLMSG_HDR.size <= len(data):
            length = NLMSG_HDR.unpack_from(data, off)[0]
            if length < NLMSG_HDR.size:
                return
            base = off + NLMSG_HDR.size + CN_MSG.size
            if base + PROC_EVENT_HDR.size + EXIT_EVENT.size <= off + length:
                what = PROC_EVENT_HDR.unpack_from(data, base)[0]
                if what == PROC_EVENT_EXIT:
                    pid, tgid, status, _ = EXIT_EVENT.unpack_from(data, base + PROC_EVENT_HDR.size)
                    if pid == tgid:  # the process itself, not one of its threads
                        self.record(pid, status)
            off += (length + 3) & ~3

    def record(self, pid: int, status: int, at: float | None = None) -> None:
        with self._lock:
            self.received += 1
            self._exits[pid] = (status, time.time() if at is None else at)
            self._exits.move_to_end(pid)
            while len(self._exits) > self.max_entries:
                self._exits.popitem(last=False)

    def lookup(self, pid: int, *, not_before: float = 0.0, wait_s: float = 0.2) -> int | None:
        """The wait status of `pid` if it exited after `not_before` (its start time, so a reused
        PID does not match). Waits up to `wait_s` for the event to arrive."""
        deadline = time.monotonic() + (wait_s if self.running else 0.0)
        while True:
            with self._lock:
                hit = self._exits.get(pid)
            if hit is not None and hit[1] >= not_before:
                return hit[0]
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    def close(self) -> None:
        self._stop.set()
        sock, self._sock = self._sock, None
        if self._thread is not None:
            self._thread.join(2)
            self._thread = None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.send(self._control(sock, PROC_CN_MCAST_IGNORE))
            sock.close()


def can_listen() -> bool:
    """Cheap check used by tests: is the process connector usable here?"""
    c = ProcConnectorExits()
    ok = c.start()
    c.close()
    return ok and os.name == "posix"
