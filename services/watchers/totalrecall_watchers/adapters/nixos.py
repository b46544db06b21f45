"""The NixOS generation watcher: reads the system profile's links (`system-N-link`, `system`)
and, for a new generation, `nix store diff-closures`; `core/nixos.py` says what changed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent

from ..core.base import EventContext, Watcher
from ..core.nixos import generation_events, generation_number

if TYPE_CHECKING:
    from ..settings import NixosSettings


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
            n = generation_number(p.name)
            if n is not None:
                try:
                    out[n] = os.readlink(p)
                except OSError:
                    out[n] = ""
        return out

    def _current(self) -> int | None:
        try:
            return generation_number(os.readlink(self.dir / "system"))
        except OSError:
            return None

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
            events = generation_events(self.ctx, self.name, self.generations, self.current, gens,
                                       cur, self._diff)
        self.generations, self.current = gens, cur
        return events
