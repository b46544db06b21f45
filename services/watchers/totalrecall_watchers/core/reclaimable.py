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

The commands are said, never run. This module says what is measured and when it is news;
`adapters/reclaimable.py` is the watcher that walks the places.

Sizes are the bytes of the files (`du`-like, this filesystem only, no symlinks followed). One
event (`system.storage/reclaimable`) when the total first reaches `min_total_bytes`, and then
only when it moved by `change_fraction` since the last one (or fell back under the minimum):
no event every hour. The recall API turns the newest into a proactive alert with the commands
(`reclaimable_space`). Container images and build caches are the containers watcher's to
measure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, human_bytes

CATEGORY = "system.storage"
SUBCATEGORY = "reclaimable"


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


def places(root: Path, homes: list[Path]) -> list[Place]:
    """Every place measured, under `root` (`/`; tests give a tree of their own) and in each of
    `homes`."""
    out = [Place("systemd journal", root / "var/log/journal", "journalctl --vacuum-time=2weeks"),
           Place("apt package cache", root / "var/cache/apt/archives", "apt-get clean"),
           Place("dnf package cache", root / "var/cache/dnf", "dnf clean packages"),
           Place("pacman package cache", root / "var/cache/pacman/pkg", "paccache -r")]
    for home in homes:
        out.append(Place("pip cache", home / ".cache/pip", "pip cache purge"))
        out.append(Place("npm cache", home / ".npm/_cacache", "npm cache clean --force"))
    return out


def generations_found(root: Path, old: int) -> Found | None:
    """`old` NixOS system generations beyond the current one, as a find (their size is known
    only to the Nix store)."""
    if not old:
        return None
    return Found("NixOS system generations", str(root / "nix/var/nix/profiles"), 0,
                 "nix-collect-garbage --delete-older-than 14d", count=old)


def by_size(found: list[Found]) -> list[Found]:
    return sorted(found, key=lambda f: (-f.bytes, f.what))


class ReclaimableReport:
    """When the total is news: the first time it reaches `min_total_bytes`, then when it moved
    by `change_fraction` since the last report, and once when it falls back under the minimum."""

    def __init__(self, ctx: EventContext, min_total_bytes: int, change_fraction: float) -> None:
        self.ctx = ctx
        self.min_total_bytes = min_total_bytes
        self.change_fraction = change_fraction
        #: The total last reported (None: nothing reported yet, or back under the minimum).
        self.reported: int | None = None

    def update(self, found: list[Found]) -> list[MemoryEvent]:
        total = sum(f.bytes for f in found)
        if total < self.min_total_bytes:
            if self.reported is None:
                return []
            self.reported = None  # back under: said once, re-armed
            return [self._event(found, total, below=True)]
        if self.reported is not None and \
                abs(total - self.reported) < self.change_fraction * self.reported:
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
