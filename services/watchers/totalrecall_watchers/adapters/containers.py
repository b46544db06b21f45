"""Containers watcher's I/O: the engine CLIs (`version`, `events`, `inspect`, `system df`) and
the kernel's log (`/dev/kmsg`). What their output means is core/containers_*.py's business."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..core.containers_events import find_oom_kill, kmsg_record


@dataclass
class Engine:
    """An engine whose CLI answered `version`."""

    name: str
    cli: str
    version: str = ""


def probe_engine(engine: str, cli: str, timeout_s: float) -> tuple[Engine | None, str, str]:
    """(the engine when usable, why not, what its `version` printed)."""
    path = shutil.which(cli)
    if path is None:
        return None, f"{cli} not found on PATH", ""
    try:
        proc = subprocess.run([path, "version"], capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`{engine} version` failed: {exc}"[:300], ""
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        err = next((ln.strip() for ln in reversed(proc.stderr.splitlines()) if ln.strip()),
                   f"exit status {proc.returncode}")
        return None, f"`{engine} version` failed: {err}"[:300], out
    m = re.search(r"(?im)^\s*version:\s*(\S+)", proc.stdout)
    return Engine(engine, path, m.group(1) if m else ""), "", out


async def spawn_follower(cmd: list[str]) -> asyncio.subprocess.Process:
    """A long-running command whose stdout is read line by line (`<engine> events`)."""
    return await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL, limit=1 << 20)


class KernelLog:
    """The kernel's log ring buffer (`/dev/kmsg`, readable by root or with CAP_SYSLOG): finds
    the OOM kill of a container by its id (the `oom-kill:` record names its memory cgroup,
    `libpod-<id>`, `docker-<id>.scope`, `/docker/<id>`)."""

    def __init__(self, path: str = "/dev/kmsg",
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.monotonic = monotonic

    def check(self) -> str | None:
        """None when readable, else why not."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            return f"{self.path}: {exc.strerror or exc}"
        os.close(fd)
        return None

    def records(self) -> Iterator[tuple[float, str]]:
        """(seconds since boot, message) of every record in the buffer. /dev/kmsg gives one
        record per read and EAGAIN at the end; a plain file (tests) is read as lines."""
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        buf = b""
        try:
            while True:
                try:
                    chunk = os.read(fd, 16384)
                except BlockingIOError:
                    break
                except BrokenPipeError:  # a record was overwritten while reading: go on
                    continue
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    rec = kmsg_record(line)
                    if rec is not None:
                        yield rec
            rec = kmsg_record(buf)
            if rec is not None:
                yield rec
        finally:
            os.close(fd)

    def find_oom_kill(self, container_id: str, lookback_s: float) -> tuple[str, ...]:
        """The kernel's lines about an OOM kill in this container's cgroup within the last
        `lookback_s` (empty: none); see core's `find_oom_kill`."""
        if len(container_id) < 12:
            return ()
        return find_oom_kill(self.records(), container_id, self.monotonic() - lookback_s)
