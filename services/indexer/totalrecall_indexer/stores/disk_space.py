"""The room left on the state disk, and the refusal a Zvec write gets when it is nearly full.

zvec 0.8 writes its segments through memory-mapped files. On a full file system a store into a
page with no block behind it kills the whole process with SIGBUS: not an error anyone can catch,
and the batch in flight is lost to the process (redelivered, but the indexer restarts). And a
collection whose write-ahead log must be replayed cannot be opened while the disk is full
("recovery idmap failed"): that is no damage, and quarantining it (start the tier empty, re-embed
everything) would turn a full disk into a tier without vectors. So Zvec is neither written nor
declared broken while the disk holds less than a margin (`SpaceGuard`); what is refused is
retried once space is back.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path


class StateDiskFull(OSError):
    """The state disk is (nearly) full: retry once space is back; nothing is lost."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.ENOSPC, message)

    def __str__(self) -> str:
        return str(self.strerror)


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system of `path`."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class SpaceGuard:
    """Refuses work on `root`'s file system while it has less than `min_free` bytes free
    (0: never refuses)."""

    def __init__(self, root: Path, min_free: int,
                 free: Callable[[Path], int] = free_bytes) -> None:
        self.root = root
        self.min_free = min_free
        self._free = free

    def free(self) -> int | None:
        """Free bytes now, or None when the file system cannot be asked."""
        try:
            return self._free(self.root)
        except OSError:
            return None

    def low(self) -> bool:
        if self.min_free <= 0:
            return False
        free = self.free()
        return free is not None and free < self.min_free

    def check(self, what: str) -> None:
        """Raise StateDiskFull when the disk is below the margin, naming `what` was refused."""
        if self.min_free <= 0:
            return
        free = self.free()
        if free is not None and free < self.min_free:
            raise StateDiskFull(
                f"state disk full: {what} refused with {free / 2**20:.1f} MiB free, below the "
                f"{self.min_free / 2**20:.0f} MiB zvec needs to write safely; retried once "
                "space is back")
