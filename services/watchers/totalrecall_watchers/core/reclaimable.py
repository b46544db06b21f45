"""Reclaimable space: what could be freed on this machine, measured, never deleted.

Every `interval_s` (an hour by default) the watcher measures the places that grow without
anyone asking and that their own tool can shrink:

- the systemd journal (`/var/log/journal`): `journalctl --vacuum-time=2weeks`;
- apt, dnf and pacman package caches (`/var/cache/apt/archives`, `/var/cache/dnf`,
  `/var/cache/pacman/pkg`): `apt-get clean`, `dnf clean packages`, `paccache -r`;
- pip's and npm's caches in each home (`/root`, `/home/*`: `~/.cache/pip`, `~/.npm/_cacache`):
  `pip cache purge`, `npm cache clean --force`;
- old NixOS generations (`/nix/var/nix/profiles/system-*-link` beyond the current one; counted,
  their size is known only to the Nix store): `nix-collect-garbage --delete-older-than 14d`.

The commands are said, never run.

Sizes are the bytes of the files (`du`-like, this filesystem only, no symlinks followed). One
event (`system.storage/reclaimable`) when the total first reaches `min_total_bytes`, and then
only when it moved by `change_fraction` since the last one (or fell back under the minimum):
no event every hour. The recall API turns the newest into a proactive alert with the commands
(`reclaimable_space`). Container images and build caches are the containers watcher's to
measure.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher, human_bytes

if TYPE_CHECKING:
    from ..settings import ReclaimableSettings

CATEGORY = "system.storage"
SUBCATEGORY = "reclaimable"
#: Files looked at per place at most (a cache of millions of files is not walked whole: its
#: size is then a lower bound, said in the event).
MAX_FILES = 500_000


@dataclass(frozen=True)
class Place:
    what: str
    path: Path
    command: str


@dataclass(frozen=True)
class Found:
    what: str
    path: str
    bytes: int
    command: str
    partial: bool = False
    count: int | None = None  # generations: how many, when their size is unknown

    def line(self) -> str:
        size = f"{human_bytes(self.bytes)}{'+' if self.partial else ''}" if self.count is None \
            else f"{self.count} old generation{'s' if self.count != 1 else ''}"
        return f"{self.what} {size} ({self.path}): {self.command}"


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


def places(root: Path) -> list[Place]:
    """Every place measured, under `root` (`/`; tests give a tree of their own)."""
    out = [Place("systemd journal", root / "var/log/journal", "journalctl --vacuum-time=2weeks"),
           Place("apt package cache", root / "var/cache/apt/archives", "apt-get clean"),
           Place("dnf package cache", root / "var/cache/dnf", "dnf clean packages"),
           Place("pacman package cache", root / "var/cache/pacman/pkg", "paccache -r")]
    for home in homes(root):
        out.append(Place("pip cache", home / ".cache/pip", "pip cache purge"))
        out.append(Place("npm cache", home / ".npm/_cacache", "npm cache clean --force"))
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


def measure(root: Path, max_files: int = MAX_FILES) -> list[Found]:
    found: list[Found] = []
    for place in places(root):
        if not place.path.is_dir():
            continue
        size, partial = tree_bytes(place.path, max_files)
        if size > 0:
            found.append(Found(place.what, str(place.path), size, place.command, partial))
    gens = old_generations(root)
    if gens:
        found.append(Found("NixOS system generations", str(root / "nix/var/nix/profiles"), 0,
                           "nix-collect-garbage --delete-older-than 14d", count=gens))
    return sorted(found, key=lambda f: (-f.bytes, f.what))


class ReclaimableWatcher(Watcher):
    name = "reclaimable"

    def __init__(self, ctx: EventContext, settings: ReclaimableSettings) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.root = Path(settings.root)
        #: The total last reported (None: nothing reported yet, or back under the minimum).
        self.reported: int | None = None

    def check_available(self) -> str | None:
        if not self.root.is_dir():
            return f"{self.root} is not a directory"
        return None

    def poll(self) -> list[MemoryEvent]:
        found = measure(self.root, self.settings.max_files)
        total = sum(f.bytes for f in found)
        s = self.settings
        if total < s.min_total_bytes:
            if self.reported is None:
                return []
            self.reported = None  # back under: said once, re-armed
            return [self._event(found, total, below=True)]
        if self.reported is not None and \
                abs(total - self.reported) < s.change_fraction * self.reported:
            return []
        self.reported = total
        return [self._event(found, total)]

    def _event(self, found: Iterable[Found], total: int, below: bool = False) -> MemoryEvent:
        items = list(found)
        top = ", ".join(f"{f.what} {human_bytes(f.bytes)}" for f in items if f.bytes)[:300]
        if below:
            summary = (f"Reclaimable space down to {human_bytes(total)} (caches and old logs): "
                       f"nothing worth cleaning now")
        else:
            summary = (f"{human_bytes(total)} of disk space could be reclaimed (not deleted): "
                       f"{top or 'old generations'}")
        detail = "\n".join(f"- {f.line()}" for f in items) or "(nothing found)"
        return self.ctx.event(
            "reclaimable", CATEGORY, SUBCATEGORY, summary,
            detail=f"What could be freed, and the command that frees it (never run by Total "
                   f"Recall):\n{detail}",
            severity=Severity.INFO, total_bytes=total,
            items=[{"what": f.what, "path": f.path, "bytes": f.bytes, "command": f.command,
                    **({"partial": True} if f.partial else {}),
                    **({"count": f.count} if f.count is not None else {})} for f in items],
            tags=["reclaimable", "disk"])
