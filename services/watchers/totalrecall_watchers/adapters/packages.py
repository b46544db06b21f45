"""The packages watcher and its I/O: dpkg's and apt's logs, pip's site-packages, npm's CLI, the
state file. What they say is core/packages_changes.py's business, what it is worth
core/packages.py's."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent

from ..core.base import EventContext, Watcher
from ..core.packages import (
    PackageEvents,
    Settle,
    dpkg_changes_dated,
    match_runs,
    snapshot_changes,
)
from ..core.packages_changes import AptRun, DpkgLog, PackageChange, apt_runs, parse_npm_ls

if TYPE_CHECKING:
    from ..settings import PackagesSettings

MAX_READ = 4 << 20  # bytes of dpkg.log per poll; the rest is read on the next polls


def read_tail(path: Path, max_bytes: int = 512 * 1024) -> str:
    """The last `max_bytes` of a file ("" when unreadable): recent runs only."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


@dataclass
class TailState:
    inode: int | None = None
    offset: int = 0


def read_new_lines(path: Path, state: TailState) -> tuple[list[str], TailState]:
    """Complete lines appended since `state`; follows one rotation to `<path>.1`."""
    lines: list[str] = []
    try:
        st = os.stat(path)
    except OSError:
        return lines, state
    if state.inode is None:  # first start: from the end, no history
        return lines, TailState(st.st_ino, st.st_size)
    if st.st_ino != state.inode:
        rotated = path.with_name(path.name + ".1")
        try:
            if os.stat(rotated).st_ino == state.inode:
                lines += _read_from(rotated, state.offset)[0]
        except OSError:
            pass
        state = TailState(st.st_ino, 0)
    elif st.st_size < state.offset:  # truncated
        state = TailState(st.st_ino, 0)
    more, offset = _read_from(path, state.offset)
    return lines + more, TailState(st.st_ino, offset)


def _read_from(path: Path, offset: int) -> tuple[list[str], int]:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read(MAX_READ)
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1  # a partial last line waits for its newline
    text = data[:end].decode("utf-8", "replace")
    return text.splitlines(), offset + end


def site_dirs(environment: str) -> list[str]:
    """The site-packages directories of a venv/prefix, or the directory itself."""
    p = Path(environment).expanduser()
    if p.name in ("site-packages", "dist-packages"):
        return [str(p)]
    found = sorted(glob.glob(str(p / "lib" / "python3*" / "*-packages")))
    return found or [str(p)]


def pip_snapshot(environment: str) -> dict[str, str] | None:
    """name → version of the distributions in an environment; None when it does not exist."""
    dirs = [d for d in site_dirs(environment) if os.path.isdir(d)]
    if not dirs:
        return None
    out: dict[str, str] = {}
    for dist in importlib_metadata.distributions(path=dirs):
        name = dist.metadata["Name"] if dist.metadata else None
        if name:
            out[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
    return out


def npm_snapshot(command: list[str], timeout_s: float = 60.0) -> dict[str, str] | None:
    """name → version of npm's global packages; None when npm is absent or fails."""
    if not command or shutil.which(command[0]) is None:
        return None
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                           check=False)
        return parse_npm_ls(r.stdout, r.returncode)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def npm_global_root(cmd: list[str]) -> str | None:
    """npm's global node_modules (`npm root -g`, with the command's --prefix); None when npm is
    absent or fails."""
    if not cmd or shutil.which(cmd[0]) is None:
        return None
    extra = [a for i, a in enumerate(cmd) if a == "--prefix" or (
        i > 0 and cmd[i - 1] == "--prefix")]
    try:
        r = subprocess.run([cmd[0], "root", "-g", *extra], capture_output=True,
                           text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    root = r.stdout.strip()
    return root if r.returncode == 0 and root else None


def mtimes(dirs: Sequence[str | None]) -> tuple[Any, ...]:
    """(directory, its mtime in ns or None when it cannot be read) of each directory."""
    stamp: list[Any] = []
    for d in dirs:
        try:
            stamp.append((d, os.stat(str(d)).st_mtime_ns))
        except OSError:
            stamp.append((d, None))
    return tuple(stamp)


def default_pip_environments() -> list[str]:
    """pip's installs outside the distribution's packages (which dpkg reports)."""
    home = os.path.expanduser("~")
    return sorted({*glob.glob("/usr/local/lib/python3*/*-packages"),
                   *glob.glob(f"{home}/.local/lib/python3*/site-packages")})


def load_state(path: Path) -> dict[str, Any]:
    """The persisted state ({} when absent or unreadable: the next poll starts afresh)."""
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_state(path: Path, state: dict[str, Any]) -> None:
    """Write the state whole or not at all (a temporary file, fsynced, renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


class PackagesWatcher(Watcher):
    """Reads dpkg's log (from its persisted place), the pip environments and npm's globals;
    `core/packages.py` says what changed and writes the events."""

    name = "packages"

    def __init__(self, ctx: EventContext, settings: PackagesSettings, state_file: Path) -> None:
        super().__init__(ctx)
        self.s = settings
        self.interval_s = settings.interval_s
        self.state_file = state_file
        self._state: dict[str, Any] = load_state(state_file)
        self._dirty = False
        self._settle = Settle()
        self._npm_root: str | None = None
        self.render = PackageEvents(ctx, self.name, settings.max_individual)

    def _commit(self) -> None:
        """Persist the state of the previous poll (its events are published or spooled now)."""
        if not self._dirty:
            return
        save_state(self.state_file, self._state)
        self._dirty = False

    def check_available(self) -> str | None:
        sources = []
        if self.s.dpkg and Path(self.s.dpkg_log).exists():
            sources.append("dpkg")
        if self.s.pip and any(pip_snapshot(e) is not None for e in self._pip_environments()):
            sources.append("pip")
        if self.s.npm and self.s.npm_command and shutil.which(self.s.npm_command[0]):
            sources.append("npm")
        if not sources:
            return (f"no package source: no {self.s.dpkg_log}, no pip environment, no npm")
        self.note = "sources: " + ", ".join(sources)
        return None

    def _pip_environments(self) -> list[str]:
        if self.s.pip_environments is not None:
            return list(self.s.pip_environments)
        return default_pip_environments()

    def poll(self) -> list[MemoryEvent]:
        self._commit()
        changes: list[PackageChange] = []
        if self.s.dpkg:
            changes += self._poll_dpkg()
        if self.s.pip:
            for env in self._pip_environments():
                if self._changed(f"pip:{env}", site_dirs(env)):
                    changes += self._poll_snapshot("pip", env, pip_snapshot(env))
        if self.s.npm and self._changed("npm", [self._npm_global_root()]):
            changes += self._poll_snapshot("npm", "global", npm_snapshot(self.s.npm_command))
        return self.render.events(changes, self._asked_by(changes))

    def _changed(self, key: str, dirs: Sequence[str | None]) -> bool:
        """Whether a source's directories may have changed (`Settle`)."""
        known = not any(d is None for d in dirs)
        return self._settle.changed(key, mtimes(dirs) if known else None)

    def _npm_global_root(self) -> str | None:
        """npm's global node_modules (`npm root -g`, with the command's --prefix), asked once:
        `npm ls` costs ~0.5 s of CPU, so it runs only when this directory changed."""
        if self._npm_root is None:
            self._npm_root = npm_global_root(self.s.npm_command)
        return self._npm_root

    def _poll_dpkg(self) -> list[PackageChange]:
        st = self._state.setdefault("dpkg", {})
        tail = TailState(st.get("inode"), int(st.get("offset", 0)))
        lines, new_tail = read_new_lines(Path(self.s.dpkg_log), tail)
        log = DpkgLog(st.get("pending"))
        changes = [c for c in (log.feed(line) for line in lines) if c is not None]
        if new_tail != tail or lines:
            self._state["dpkg"] = {"inode": new_tail.inode, "offset": new_tail.offset,
                                   "pending": log.pending}
            self._dirty = True
        return changes

    def _poll_snapshot(self, manager: str, env: str,
                       snap: dict[str, str] | None) -> list[PackageChange]:
        if snap is None:
            return []  # absent or unreadable now: keep the last snapshot, report nothing
        changes, dirty = snapshot_changes(self._state.setdefault(manager, {}), manager, env,
                                          snap)
        self._dirty = self._dirty or dirty
        return changes

    def _asked_by(self, changes: list[PackageChange]) -> dict[str, AptRun]:
        """origin → the apt run that made each dpkg change (apt's history read only when there
        are some)."""
        if not dpkg_changes_dated(changes) or not self.s.apt_history:
            return {}
        return match_runs(changes, apt_runs(read_tail(Path(self.s.apt_history))))
