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
import shutil
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
    return shutil.disk_usage(path).free


class SpaceGuard:
    """Refuses work on `root`'s file system while it has less than `min_free` bytes free
    (0: never refuses)."""

    def __init__(self, root: Path, min_free: int,
                 free: Callable[[Path], int] = free_bytes) -> None:
        self.root = root
        self.min_free = min_free
        self._free = free

    def _short(self) -> int | None:
        """The bytes free when they are below the margin; None when they are not (or the file
        system cannot be asked)."""
        if self.min_free <= 0:
            return None
        try:
            free = self._free(self.root)
        except OSError:
            return None
        return free if free < self.min_free else None

    def low(self) -> bool:
        return self._short() is not None

    def check(self, what: str) -> None:
        """Raise StateDiskFull when the disk is below the margin, naming `what` was refused."""
        free = self._short()
        if free is not None:
            raise StateDiskFull(
                f"state disk full: {what} refused with {free / 2**20:.1f} MiB free, below the "
                f"{self.min_free / 2**20:.0f} MiB zvec needs to write safely; retried once "
                "space is back")
