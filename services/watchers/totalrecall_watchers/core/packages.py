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

import hashlib
import shutil
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent

from ..adapters.packages import (
    TailState,
    default_pip_environments,
    load_state,
    mtimes,
    npm_global_root,
    npm_snapshot,
    pip_snapshot,
    read_new_lines,
    read_tail,
    save_state,
    site_dirs,
)
from .base import EventContext, Watcher
from .packages_changes import (
    AptRun,
    DpkgLog,
    PackageChange,
    apt_runs,
    describe,
    diff_snapshots,
    where_from,
)

if TYPE_CHECKING:
    from ..settings import PackagesSettings

#: Re-exported: what other modules and tests know this watcher's parts by.
__all__ = ["AptRun", "DpkgLog", "PackageChange", "PackagesWatcher", "TailState", "apt_runs",
           "diff_snapshots", "npm_snapshot", "pip_snapshot", "read_new_lines"]


class PackagesWatcher(Watcher):
    name = "packages"

    def __init__(self, ctx: EventContext, settings: PackagesSettings, state_file: Path) -> None:
        super().__init__(ctx)
        self.s = settings
        self.interval_s = settings.interval_s
        self.state_file = state_file
        self._state: dict[str, Any] = load_state(state_file)
        self._dirty = False
        self._seen: dict[str, tuple[Any, ...]] = {}
        self._settled: dict[str, tuple[Any, ...] | None] = {}
        self._npm_root: str | None = None
        #: dpkg change (origin) → the apt run that made it, for the poll being built.
        self._runs: dict[str, AptRun] = {}

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
        return self._events(changes)

    def _changed(self, key: str, dirs: Sequence[str | None]) -> bool:
        """Whether the directories holding a source's packages may have changed: their mtimes
        differ from the last read that saw them settle (an install adds or removes an entry).
        A change is read twice (now and next poll), because a package's metadata may still be
        being written when its directory appears. Unknown directories: always read."""
        if any(d is None for d in dirs):
            return True
        cur = mtimes(dirs)
        if cur == self._settled.get(key):
            return False
        self._settled[key] = cur if cur == self._seen.get(key) else None
        self._seen[key] = cur
        return True

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
        where = where_from(c)
        summary = f"{where}: {c.verb} {describe(c)}"
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
        where = where_from(group[0])
        summary = f"{where}: " + ", ".join(f"{n} packages {verb}"
                                           for verb, n in counts.most_common())
        names = ", ".join(c.package for c in group[:30]) + (" …" if len(group) > 30 else "")
        detail = "\n".join(f"{c.verb} {describe(c)}" for c in group)
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
