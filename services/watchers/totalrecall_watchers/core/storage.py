"""Storage watcher: space and inode usage per filesystem, mounts and unmounts.

Reports crossing into a level (warning ≥ 90 %, critical ≥ 95 % by default; per filesystem in
`thresholds`), including on the first look, and once when usage is back below the warning level
(hysteresis: 2 points, or a fifth of the warning-to-critical gap when that is smaller).
Percentages are unrounded (used / (used + free), as `df` computes them). The filesystems are
read by `adapters/storage.py`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher, human_bytes

if TYPE_CHECKING:
    from ..settings import StorageSettings, StorageThresholds

HYSTERESIS = 2.0


@dataclass(frozen=True)
class Usage:
    mountpoint: str
    device: str
    fstype: str
    total: int
    used: int
    free: int
    percent: float
    inodes_total: int
    inodes_free: int

    @property
    def inode_percent(self) -> float:
        if self.inodes_total <= 0:
            return 0.0
        return 100.0 * (self.inodes_total - self.inodes_free) / self.inodes_total


class StorageSource(Protocol):
    def usage(self) -> list[Usage]: ...


class StorageWatcher(Watcher):
    name = "storage"

    def __init__(self, ctx: EventContext, settings: StorageSettings,
                 source: StorageSource) -> None:
        super().__init__(ctx)
        self.interval_s = settings.interval_s
        self.warn = settings.warn_percent
        self.crit = settings.critical_percent
        self.inode_warn = settings.inode_warn_percent or self.warn
        self.inode_crit = settings.inode_critical_percent or self.crit
        self.per_path: dict[str, StorageThresholds] = {
            os.path.normpath(k): v for k, v in settings.thresholds.items()}
        self.source = source
        self.space_level: dict[str, int] = {}
        self.inode_level: dict[str, int] = {}
        self.mounts: set[str] | None = None

    def limits(self, mountpoint: str, kind: str) -> tuple[float, float]:
        """(warning, critical) percent for this filesystem and kind ("space" or "inode")."""
        t = self.per_path.get(os.path.normpath(mountpoint))
        if kind == "space":
            warn, crit = self.warn, self.crit
            if t is not None:
                warn, crit = t.warn_percent or warn, t.critical_percent or crit
        else:
            warn, crit = self.inode_warn, self.inode_crit
            if t is not None:
                warn, crit = t.inode_warn_percent or warn, t.inode_critical_percent or crit
        return warn, max(crit, warn)

    @staticmethod
    def _level(pct: float, prev: int, warn: float, crit: float) -> int:
        hyst = min(HYSTERESIS, (crit - warn) / 5) if crit > warn else HYSTERESIS
        if pct >= crit or (prev == 2 and pct >= crit - hyst):
            return 2
        if pct >= warn or (prev >= 1 and pct >= warn - hyst):
            return 1
        return 0

    def poll(self) -> list[MemoryEvent]:
        usages = self.source.usage()
        events: list[MemoryEvent] = []
        current = {u.mountpoint for u in usages}
        if self.mounts is not None:
            for m in sorted(current - self.mounts):
                u = next(x for x in usages if x.mountpoint == m)
                events.append(self.ctx.event(
                    self.name, "system.storage", "mount",
                    f"{u.device or 'filesystem'} mounted at {m}",
                    detail=f"device: {u.device}\nfstype: {u.fstype}\nsize: {human_bytes(u.total)}",
                    path=m, tags=["storage", "mount"]))
            for m in sorted(self.mounts - current):
                events.append(self.ctx.event(self.name, "system.storage", "unmount",
                                             f"{m} unmounted", path=m, tags=["storage", "unmount"]))
                self.space_level.pop(m, None)
                self.inode_level.pop(m, None)
        self.mounts = current
        for u in usages:
            events.extend(self._check(u, "space", u.percent, self.space_level))
            events.extend(self._check(u, "inode", u.inode_percent, self.inode_level))
        return events

    def _check(self, u: Usage, kind: str, pct: float, levels: dict[str, int]) -> list[MemoryEvent]:
        prev = levels.get(u.mountpoint, 0)
        warn, crit = self.limits(u.mountpoint, kind)
        level = self._level(pct, prev, warn, crit)
        levels[u.mountpoint] = level
        if level == prev:
            return []
        sub = "space_warning" if kind == "space" else "inode_warning"
        if kind == "space":
            what = f"{u.mountpoint} at {pct:.0f}% capacity, {human_bytes(u.free)} remaining"
        else:
            what = (f"{u.mountpoint} inodes at {pct:.0f}% "
                    f"({u.inodes_free} of {u.inodes_total} free)")
        detail = (f"mountpoint: {u.mountpoint}\ndevice: {u.device}\nfstype: {u.fstype}\n"
                  f"size: {human_bytes(u.total)}, used {human_bytes(u.used)}, "
                  f"free {human_bytes(u.free)} ({u.percent:.1f}%)\n"
                  f"inodes: {u.inodes_total - u.inodes_free} of {u.inodes_total} used "
                  f"({u.inode_percent:.1f}%)")
        if level < prev:
            if level > 0:
                return []  # critical → warning: not news
            return [self.ctx.event(self.name, "system.storage", sub,
                                   f"{u.mountpoint} {kind} usage back to {pct:.0f}%",
                                   detail=detail, path=u.mountpoint, severity=Severity.INFO,
                                   tags=["storage", kind, "recovered"], percent=round(pct, 3),
                                   level="ok")]
        sev = Severity.CRITICAL if level == 2 else Severity.WARNING
        return [self.ctx.event(self.name, "system.storage", sub, what, detail=detail,
                               path=u.mountpoint, severity=sev, tags=["storage", kind],
                               percent=round(pct, 3), free_bytes=u.free,
                               threshold_percent=crit if level == 2 else warn,
                               level="critical" if level == 2 else "warning")]
