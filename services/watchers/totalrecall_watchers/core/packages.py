"""Package watcher for any distribution: dpkg/apt (its log), pip environments and npm's global
packages (snapshots), as `system.package` install / upgrade / remove events.

* dpkg: `/var/log/dpkg.log` is tailed from a persisted (inode, offset). An action line
  (`install|upgrade|remove|purge pkg:arch old new`) opens an operation that the package's final
  `status` line closes (`installed` for install/upgrade, `config-files`/`not-installed` for
  remove/purge): a failed unpack never becomes "installed". A rotation (`dpkg.log` →
  `dpkg.log.1`) is followed: the rest of the old file is read first. The first start reads
  nothing old (no replay of the machine's history).
* pip: no log. Each configured environment (a venv/prefix or a site-packages directory) is read
  with `importlib.metadata` (no subprocess) and diffed against the persisted snapshot.
* npm: `npm ls -g --json --depth=0`, diffed the same way; skipped when npm is absent.
* Who asked: a dpkg change that apt made carries apt's `Commandline` (`apt-get install nginx`)
  and `Requested-By` (the user who ran it through sudo) from `/var/log/apt/history.log`, the run
  whose start and end enclose the change and that lists the package (`apt_runs`). A pip or npm
  change carries no command: neither keeps a log of what asked for it.

The state (offset, pending dpkg operations, snapshots) is written at the start of the NEXT poll,
after the runner has published or spooled this poll's events: a crash in between re-reads the
same lines, and event ids derived from them make that a no-op downstream.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent

from .base import EventContext, Watcher
from .scrub import scrub_extra

if TYPE_CHECKING:
    from ..settings import PackagesSettings

MAX_READ = 4 << 20  # bytes of dpkg.log per poll; the rest is read on the next polls
_DPKG = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2}) (?P<rest>.*)$")
_ACTIONS = {"install": "install", "upgrade": "upgrade", "remove": "remove", "purge": "remove"}
_VERBS = {"install": "installed", "upgrade": "upgraded", "remove": "removed",
          "downgrade": "downgraded"}


@dataclass(frozen=True)
class PackageChange:
    manager: str  # dpkg | pip | npm
    action: str  # install | upgrade | remove
    package: str
    version: str | None
    old_version: str | None
    environment: str = ""
    arch: str | None = None
    at: datetime | None = None  # when it happened (dpkg); None: when it was noticed
    origin: str = ""  # what makes the event id unique and repeatable (a log line, a snapshot)

    @property
    def verb(self) -> str:
        if self.action == "upgrade" and version_lower(self.version, self.old_version):
            return _VERBS["downgrade"]
        return _VERBS[self.action]


def version_lower(new: str | None, old: str | None) -> bool:
    """Whether `new` sorts before `old` (PEP 440 when both parse, else never)."""
    if not new or not old:
        return False
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging ships with pip/setuptools
        return False
    try:
        return Version(new) < Version(old)
    except InvalidVersion:
        return False


def _none(v: str) -> str | None:
    return None if v == "<none>" else v


# --- dpkg ---------------------------------------------------------------------------------------
class DpkgLog:
    """The dpkg log state machine over lines (pure: no file access)."""

    def __init__(self, pending: dict[str, list[str]] | None = None) -> None:
        #: package:arch → [action, old, new, date, time] of an operation not yet finished.
        self.pending: dict[str, list[str]] = dict(pending or {})

    def feed(self, line: str) -> PackageChange | None:
        m = _DPKG.match(line.strip())
        if m is None:
            return None
        parts = m.group("rest").split()
        if len(parts) == 4 and parts[0] in _ACTIONS:
            action, pkg, old, new = parts
            self.pending[pkg] = [action, old, new, m.group("date"), m.group("time")]
            return None
        if len(parts) != 4 or parts[0] != "status":
            return None
        _, state, pkg, _version = parts
        op = self.pending.get(pkg)
        if op is None:
            return None  # a trigger or reconfiguration, not a change of the package
        action = _ACTIONS[op[0]]
        done = ((state == "installed" and action in ("install", "upgrade"))
                or (state in ("config-files", "not-installed") and action == "remove"))
        if not done:
            return None
        del self.pending[pkg]
        name, _, arch = pkg.partition(":")
        old, new = _none(op[1]), _none(op[2])
        if action == "install" and old is not None and old != new:
            action = "upgrade"  # `install` over an older version (dpkg -i of a newer .deb)
        at = datetime.fromisoformat(f"{m.group('date')}T{m.group('time')}").astimezone(UTC)
        return PackageChange("dpkg", action, name, new if action != "remove" else None,
                             old if action != "install" else None, arch=arch or None,
                             at=at, origin=" ".join(op) + "\x00" + line.strip())


@dataclass(frozen=True)
class AptRun:
    """One entry of apt's history log: what command changed which packages, when, for whom."""

    start: datetime
    end: datetime | None
    command: str
    requested_by: str | None
    packages: frozenset[str]

    def covers(self, c: PackageChange, slack_s: float = 5.0) -> bool:
        if c.at is None:
            return False
        end = self.end or self.start
        within = (self.start.timestamp() - slack_s <= c.at.timestamp()
                  <= end.timestamp() + slack_s)
        return within and (not self.packages or c.package in self.packages)


_APT_PKG = re.compile(r"(?:^|,\s*)([A-Za-z0-9.+\-]+)(?::[a-z0-9]+)?\s*\(")


def _apt_time(value: str) -> datetime | None:
    try:
        return datetime.strptime(" ".join(value.split()), "%Y-%m-%d %H:%M:%S").astimezone(UTC)
    except ValueError:
        return None


def apt_runs(text: str) -> list[AptRun]:
    """apt's history log (`Start-Date`, `Commandline`, `Requested-By`, `Install`/`Upgrade`/
    `Remove`/`Purge`/`Downgrade`/`Reinstall`, `End-Date`, a blank line between runs)."""
    runs: list[AptRun] = []
    for block in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(": ")
            if sep:
                fields[key.strip()] = value.strip()
        start = _apt_time(fields.get("Start-Date", ""))
        if start is None:
            continue
        pkgs = set()
        for key in ("Install", "Upgrade", "Remove", "Purge", "Downgrade", "Reinstall"):
            pkgs.update(_APT_PKG.findall(fields.get(key, "")))
        runs.append(AptRun(start, _apt_time(fields.get("End-Date", "")),
                           scrub_extra(fields.get("Commandline", ""))[:500],
                           fields.get("Requested-By") or None, frozenset(pkgs)))
    return runs


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


# --- pip / npm snapshots -------------------------------------------------------------------------
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
        data = json.loads(r.stdout or "{}")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        # A prefix without a `lib/node_modules` yet has no global packages; other errors
        # leave the last snapshot alone.
        return {} if error.get("code") == "ENOENT" else None
    deps = data.get("dependencies")
    if not isinstance(deps, dict):
        return {} if r.returncode == 0 else None
    return {name: str(info.get("version", "")) for name, info in deps.items()
            if isinstance(info, dict)}


def diff_snapshots(manager: str, environment: str, old: dict[str, str], new: dict[str, str],
                   generation: int) -> list[PackageChange]:
    changes: list[PackageChange] = []
    for name in sorted(old.keys() | new.keys()):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        action = "install" if before is None else "remove" if after is None else "upgrade"
        origin = f"{manager}\x00{environment}\x00{generation}\x00{name}\x00{before}\x00{after}"
        changes.append(PackageChange(manager, action, name, after, before, environment,
                                     origin=origin))
    return changes


def _describe(c: PackageChange) -> str:
    if c.action == "upgrade":
        return f"{c.package} {c.old_version} → {c.version}"
    return f"{c.package} {c.version or c.old_version or ''}".rstrip()


def _where(c: PackageChange) -> str:
    return {"dpkg": "apt/dpkg", "npm": "npm (global)"}.get(c.manager, c.manager) + (
        f" in {c.environment}" if c.environment and c.manager == "pip" else "")


# --- the watcher ---------------------------------------------------------------------------------
class PackagesWatcher(Watcher):
    name = "packages"

    def __init__(self, ctx: EventContext, settings: PackagesSettings, state_file: Path) -> None:
        super().__init__(ctx)
        self.s = settings
        self.interval_s = settings.interval_s
        self.state_file = state_file
        self._state: dict[str, Any] = self._load()
        self._dirty = False
        self._seen: dict[str, tuple[Any, ...]] = {}
        self._settled: dict[str, tuple[Any, ...] | None] = {}
        self._npm_root: str | None = None
        #: dpkg change (origin) → the apt run that made it, for the poll being built.
        self._runs: dict[str, AptRun] = {}

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_file.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _commit(self) -> None:
        """Persist the state of the previous poll (its events are published or spooled now)."""
        if not self._dirty:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(self.state_file.name + ".tmp")
        with tmp.open("w") as f:
            json.dump(self._state, f)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.state_file)
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
        # pip's installs outside the distribution's packages (which dpkg reports)
        home = os.path.expanduser("~")
        return sorted({*glob.glob("/usr/local/lib/python3*/*-packages"),
                       *glob.glob(f"{home}/.local/lib/python3*/site-packages")})

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
        return self._events(changes)

    def _changed(self, key: str, dirs: Sequence[str | None]) -> bool:
        """Whether the directories holding a source's packages may have changed: their mtimes
        differ from the last read that saw them settle (an install adds or removes an entry).
        A change is read twice (now and next poll), because a package's metadata may still be
        being written when its directory appears. Unknown directories: always read."""
        if any(d is None for d in dirs):
            return True
        stamp: list[Any] = []
        for d in dirs:
            try:
                stamp.append((d, os.stat(str(d)).st_mtime_ns))
            except OSError:
                stamp.append((d, None))
        cur = tuple(stamp)
        if cur == self._settled.get(key):
            return False
        self._settled[key] = cur if cur == self._seen.get(key) else None
        self._seen[key] = cur
        return True

    def _npm_global_root(self) -> str | None:
        """npm's global node_modules (`npm root -g`, with the command's --prefix), asked once:
        `npm ls` costs ~0.5 s of CPU, so it runs only when this directory changed."""
        if self._npm_root is None:
            cmd = self.s.npm_command
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
            self._npm_root = root if r.returncode == 0 and root else None
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
        states = self._state.setdefault(manager, {})
        prev = states.get(env)
        if prev is None:  # first sight: the baseline, no history
            states[env] = {"generation": 0, "packages": snap}
            self._dirty = True
            return []
        if prev["packages"] == snap:
            return []
        generation = int(prev.get("generation", 0)) + 1
        changes = diff_snapshots(manager, env, prev["packages"], snap, generation)
        states[env] = {"generation": generation, "packages": snap}
        self._dirty = True
        return changes

    def _asked_by(self, changes: list[PackageChange]) -> dict[str, AptRun]:
        """origin → the apt run that made each dpkg change (read only when there are some)."""
        dpkg = [c for c in changes if c.manager == "dpkg" and c.at is not None]
        if not dpkg or not self.s.apt_history:
            return {}
        runs = apt_runs(read_tail(Path(self.s.apt_history)))
        out: dict[str, AptRun] = {}
        for c in dpkg:
            run = next((r for r in reversed(runs) if r.covers(c)), None)
            if run is not None:
                out[c.origin] = run
        return out

    def _events(self, changes: list[PackageChange]) -> list[MemoryEvent]:
        """One event per change; more than `max_individual` changes of one manager and
        environment in one poll (an `apt upgrade`) become one summary event."""
        self._runs = self._asked_by(changes)
        groups: dict[tuple[str, str], list[PackageChange]] = {}
        for c in changes:
            groups.setdefault((c.manager, c.environment), []).append(c)
        events: list[MemoryEvent] = []
        for group in groups.values():
            if len(group) <= self.s.max_individual:
                events += [self._event(c) for c in group]
            else:
                events.append(self._summary(group))
        return events

    def _with_command(self, summary: str, detail: str, extra: dict[str, Any],
                      group: list[PackageChange]) -> tuple[str, str]:
        """The command (and the user) that asked for these changes, when apt says."""
        runs = self._runs
        run = next((runs[c.origin] for c in group if c.origin in runs), None)
        if run is None or not run.command:
            return summary, detail
        extra["command"] = run.command
        detail += f"\ncommand: {run.command}"
        by = ""
        if run.requested_by:
            extra["requested_by"] = run.requested_by
            detail += f"\nrequested by: {run.requested_by}"
            by = f", requested by {run.requested_by.split(' (')[0]}"
        return f"{summary} (by `{run.command[:120]}`{by})", detail

    def _id(self, origin: str) -> str:
        digest = hashlib.sha256(f"{self.ctx.hostname}\x00{origin}".encode()).hexdigest()
        return f"pkg-{digest[:40]}"

    def _stamp(self, event: MemoryEvent, at: datetime | None, origin: str) -> MemoryEvent:
        update: dict[str, Any] = {"id": self._id(origin)}
        if at is not None:
            update["timestamp"] = at
        return event.model_copy(update=update)

    def _event(self, c: PackageChange) -> MemoryEvent:
        where = _where(c)
        summary = f"{where}: {c.verb} {_describe(c)}"
        detail = (f"manager: {c.manager}\npackage: {c.package}\nversion: {c.version or '-'}\n"
                  f"previous version: {c.old_version or '-'}"
                  + (f"\narchitecture: {c.arch}" if c.arch else "")
                  + (f"\nenvironment: {c.environment}" if c.environment else ""))
        extra: dict[str, Any] = {k: v for k, v in {"version": c.version, "old_version": c.old_version,
                                    "arch": c.arch, "environment": c.environment}.items() if v}
        summary, detail = self._with_command(summary, detail, extra, [c])
        event = self.ctx.event(
            self.name, "system.package", c.action, summary, detail=detail,
            tags=["package", c.manager, c.action], manager=c.manager, package=c.package,
            **extra)
        return self._stamp(event, c.at, c.origin)

    def _summary(self, group: list[PackageChange]) -> MemoryEvent:
        counts = Counter(c.verb for c in group)
        action = Counter(c.action for c in group).most_common(1)[0][0]
        where = _where(group[0])
        summary = f"{where}: " + ", ".join(f"{n} packages {verb}"
                                           for verb, n in counts.most_common())
        names = ", ".join(c.package for c in group[:30]) + (" …" if len(group) > 30 else "")
        detail = "\n".join(f"{c.verb} {_describe(c)}" for c in group)
        extra: dict[str, Any] = {"packages": [c.package for c in group[:200]],
                                 "count": len(group)}
        if group[0].environment:
            extra["environment"] = group[0].environment
        summary, detail = self._with_command(summary, detail, extra, group)
        event = self.ctx.event(
            self.name, "system.package", action, f"{summary}: {names}", detail=detail,
            tags=["package", group[0].manager, action], manager=group[0].manager, **extra)
        at = max((c.at for c in group if c.at is not None), default=None)
        return self._stamp(event, at, "\x00".join(c.origin for c in group))
