"""Who changed a file: the process, user and command behind a write, from the kernel (fanotify).

inotify (the filesystem watcher's source) says what changed, never who. fanotify says which
process wrote: each event carries the writer's pid and an open descriptor of the file. This
module keeps, for the files written lately under the watched trees, the last writer's name,
pid, user and command line (scrubbed), so that a file event can say "by vim (alice)".

- Needs CAP_SYS_ADMIN (root): otherwise `FileActors.start` raises `Unavailable` and file events
  carry no writer (said in /health).
- Best effort, by design of the kernel interface used: writes and closes after writing
  (`FAN_MODIFY`, `FAN_CLOSE_WRITE`) are attributed; a deletion, a rename or a `chmod` is not
  (fanotify reports those with file handles and no writer's descriptor). A process that exited
  before its pid was looked up is known by pid only.
- Marks are per directory (the watched trees' directories, at most `max_dirs`, and each new
  directory the filesystem watcher reports), so a write elsewhere on the disk costs nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import select
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable

import psutil

from ..core.base import Unavailable
from ..core.file_actors import (
    FAN_CLOSE_WRITE,
    FAN_MODIFY,
    FAN_Q_OVERFLOW,
    MAX_CMDLINE,
    Writer,
    parse_events,
)
from ..core.scrub import scrub_extra

log = logging.getLogger(__name__)

FAN_CLOEXEC = 0x00000001
FAN_CLASS_NOTIF = 0x00000000
FAN_MARK_ADD = 0x00000001
FAN_EVENT_ON_CHILD = 0x08000000
AT_FDCWD = -100
#: Writers remembered (the newest kept).
MAX_PATHS = 4096


def describe_process(pid: int) -> tuple[str, str, str]:
    """(name, user, command line, scrubbed) of `pid`; what is unreadable stays empty."""
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            name = p.name()
            try:
                user = p.username()
            except (psutil.Error, KeyError):
                user = ""
            try:
                cmd = " ".join(p.cmdline())
            except psutil.Error:
                cmd = ""
    except psutil.Error:
        return "", "", ""
    return name, user, scrub_extra(cmd)[:MAX_CMDLINE]


class FileActors:
    """The last writer of each file written lately under the marked directories."""

    def __init__(self, max_dirs: int = 10_000, remember_s: float = 120.0) -> None:
        self.max_dirs = max_dirs
        self.remember_s = remember_s
        self.fd = -1
        self.marked: set[str] = set()
        self._writers: OrderedDict[str, Writer] = OrderedDict()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._libc: ctypes.CDLL | None = None
        self._pid_cache: dict[int, tuple[float, tuple[str, str, str]]] = {}
        self.events = 0
        self.overflows = 0

    # --- setup -----------------------------------------------------------------------------------
    def start(self, roots: Iterable[str]) -> None:
        """Mark the trees under `roots` and start reading; Unavailable when fanotify cannot be
        used here (no root, an old kernel)."""
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if not hasattr(libc, "fanotify_init"):
            raise Unavailable("no fanotify in this C library")
        fd = libc.fanotify_init(FAN_CLOEXEC | FAN_CLASS_NOTIF, os.O_RDONLY | os.O_LARGEFILE)
        if fd < 0:
            err = ctypes.get_errno()
            raise Unavailable(f"fanotify_init: {os.strerror(err)} (needs root / CAP_SYS_ADMIN)")
        self._libc, self.fd = libc, fd
        for root in roots:
            for dirpath, dirnames, _files in os.walk(root):
                self.mark(dirpath)
                if len(self.marked) >= self.max_dirs:
                    dirnames[:] = []
        self._thread = threading.Thread(target=self._read_loop, name="fanotify", daemon=True)
        self._thread.start()

    def mark(self, directory: str) -> bool:
        """Watch the files directly in `directory` (a new directory: call it when it appears)."""
        if self._libc is None or directory in self.marked or len(self.marked) >= self.max_dirs:
            return False
        rc = self._libc.fanotify_mark(self.fd, FAN_MARK_ADD,
                                      ctypes.c_uint64(FAN_MODIFY | FAN_CLOSE_WRITE
                                                      | FAN_EVENT_ON_CHILD),
                                      AT_FDCWD, os.fsencode(directory))
        if rc != 0:
            return False
        self.marked.add(directory)
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    # --- reading ---------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.5)
                if not ready:
                    continue
                buf = os.read(self.fd, 64 * 1024)
            except OSError as exc:
                if self._stop.is_set():
                    return
                log.warning("fanotify read failed: %s", exc)
                time.sleep(1.0)
                continue
            for mask, fd, pid in parse_events(buf):
                self._one(mask, fd, pid)

    def _one(self, mask: int, fd: int, pid: int) -> None:
        if mask & FAN_Q_OVERFLOW:
            self.overflows += 1
            return
        if fd < 0:
            return
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        if pid == os.getpid():
            return
        self.events += 1
        now = time.monotonic()
        cached = self._pid_cache.get(pid)
        if cached is None or now - cached[0] > 2.0:
            cached = (now, describe_process(pid))
            self._pid_cache[pid] = cached
            if len(self._pid_cache) > 1024:
                self._pid_cache = {p: c for p, c in self._pid_cache.items() if now - c[0] < 2}
        name, user, cmd = cached[1]
        with self._lock:
            before = self._writers.get(path)
            if before is not None and before.pid == pid and not cmd:
                # Its close at exit, looked up once it was gone: what its write showed stays.
                name, user, cmd = before.name or name, before.user or user, before.cmdline
            self._writers[path] = Writer(pid, name, user, cmd, now)
            self._writers.move_to_end(path)
            while len(self._writers) > MAX_PATHS:
                self._writers.popitem(last=False)

    # --- queries ---------------------------------------------------------------------------------
    def writer_of(self, path: str) -> Writer | None:
        """The last process that wrote `path` within `remember_s`, if fanotify saw it."""
        with self._lock:
            w = self._writers.get(path) or self._writers.get(os.path.realpath(path))
        if w is None or time.monotonic() - w.at > self.remember_s:
            return None
        return w
