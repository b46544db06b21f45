"""NixOS generation watcher: a new `system-N-link`, or a switch of the current generation."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher

if TYPE_CHECKING:
    from ..settings import NixosSettings

_GEN = re.compile(r"^system-(\d+)-link$")


class NixosWatcher(Watcher):
    name = "nixos"

    def __init__(self, ctx: EventContext, settings: NixosSettings) -> None:
        super().__init__(ctx)
        self.interval_s = settings.interval_s
        self.dir = Path(settings.profiles_dir)
        self.diff_closures = settings.diff_closures
        self.generations: dict[int, str] | None = None
        self.current: int | None = None

    def check_available(self) -> str | None:
        if not (self.dir / "system").exists() and not any(self._scan()):
            return f"not NixOS (no system profile in {self.dir})"
        return None

    def _scan(self) -> dict[int, str]:
        out: dict[int, str] = {}
        try:
            entries = list(self.dir.iterdir())
        except OSError:
            return out
        for p in entries:
            m = _GEN.match(p.name)
            if m:
                try:
                    out[int(m.group(1))] = os.readlink(p)
                except OSError:
                    out[int(m.group(1))] = ""
        return out

    def _current(self) -> int | None:
        try:
            m = _GEN.match(os.readlink(self.dir / "system"))
        except OSError:
            return None
        return int(m.group(1)) if m else None

    def _diff(self, old: str, new: str) -> str:
        if not (self.diff_closures and old and new and shutil.which("nix")):
            return ""
        try:
            r = subprocess.run(["nix", "store", "diff-closures", old, new], capture_output=True,
                               text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return r.stdout[:6000] if r.returncode == 0 else ""

    def poll(self) -> list[MemoryEvent]:
        gens, cur = self._scan(), self._current()
        events: list[MemoryEvent] = []
        if self.generations is not None:
            prev_max = max(self.generations, default=0)
            for n in sorted(g for g in gens if g > prev_max):
                base = self.generations.get(prev_max, "")
                diff = self._diff(base, gens[n])
                events.append(self.ctx.event(
                    self.name, "system.config", "generation", f"NixOS generation {n} created",
                    detail=(f"generation: {n}\nstore path: {gens[n]}\nprevious: {prev_max}"
                            + (f"\nchanges (nix store diff-closures):\n{diff}" if diff else "")),
                    generation=n, tags=["nixos", "generation"]))
            if cur is not None and self.current is not None and cur != self.current:
                rollback = cur < self.current
                events.append(self.ctx.event(
                    self.name, "system.package" if rollback else "system.config",
                    "rollback" if rollback else "generation",
                    f"NixOS switched from generation {self.current} to {cur}"
                    + (" (rollback)" if rollback else ""),
                    detail=f"current: {cur} → {gens.get(cur, '?')}\nprevious: {self.current}",
                    generation=cur, severity=Severity.WARNING if rollback else Severity.INFO,
                    tags=["nixos", "switch"] + (["rollback"] if rollback else [])))
        self.generations, self.current = gens, cur
        return events
