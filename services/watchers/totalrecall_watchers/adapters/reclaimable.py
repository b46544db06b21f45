"""The reclaimable-space watcher: walks the places `core/reclaimable.py` names (file sizes,
`du`-like: this filesystem only, no symlink followed) and counts old NixOS generations; the core
says when the total is news."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent

from ..core.base import EventContext, Watcher
from ..core.reclaimable import Found, ReclaimableReport, by_size, generations_found, places

if TYPE_CHECKING:
    from ..settings import ReclaimableSettings

#: Files looked at per place at most (a cache of millions of files is not walked whole: its
#: size is then a lower bound, said in the event).
MAX_FILES = 500_000


def tree_bytes(root: Path, max_files: int = MAX_FILES) -> tuple[int, bool]:
    """Bytes of the regular files under `root` on its filesystem (no symlink followed, each
    inode once); `partial` when `max_files` stopped the walk."""
    try:
        dev = root.stat().st_dev
    except OSError:
        return 0, False
    total, files, seen = 0, 0, set()
    for dirpath, dirnames, filenames in os.walk(root, onerror=None):
        keep = []
        for d in dirnames:
            try:
                if os.lstat(os.path.join(dirpath, d)).st_dev == dev:
                    keep.append(d)
            except OSError:
                pass
        dirnames[:] = keep
        for name in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or (st.st_ino in seen and st.st_nlink > 1):
                continue
            if st.st_nlink > 1:
                seen.add(st.st_ino)
            total += st.st_blocks * 512 if st.st_blocks else st.st_size
            files += 1
            if files >= max_files:
                return total, True
    return total, False


def homes(root: Path) -> list[Path]:
    out = [root / "root"]
    with contextlib.suppress(OSError):
        out += sorted(p for p in (root / "home").iterdir() if p.is_dir())
    return out


def old_generations(root: Path) -> int:
    """System profile generations beyond the current one (NixOS)."""
    profiles = root / "nix/var/nix/profiles"
    try:
        links = [p for p in profiles.iterdir() if p.name.startswith("system-")
                 and p.name.endswith("-link")]
    except OSError:
        return 0
    return max(0, len(links) - 1)


def _is_dir(path: Path) -> bool:
    """A directory we may look into (Path.is_dir raises on a home not ours: a watcher run as
    a user, or in a container, under a /root it cannot read)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def measure(root: Path, max_files: int = MAX_FILES) -> list[Found]:
    found: list[Found] = []
    for place in places(root, homes(root)):
        if not _is_dir(place.path):
            continue
        size, partial = tree_bytes(place.path, max_files)
        if size > 0:
            found.append(Found(place.what, str(place.path), size, place.command, partial))
    gens = generations_found(root, old_generations(root))
    if gens is not None:
        found.append(gens)
    return by_size(found)


class ReclaimableWatcher(Watcher):
    name = "reclaimable"

    def __init__(self, ctx: EventContext, settings: ReclaimableSettings) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.root = Path(settings.root)
        self.report = ReclaimableReport(ctx, settings.min_total_bytes, settings.change_fraction)

    def check_available(self) -> str | None:
        if not self.root.is_dir():
            return f"{self.root} is not a directory"
        return None

    def poll(self) -> list[MemoryEvent]:
        return self.report.update(measure(self.root, self.settings.max_files))
