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

This module decides: when a source is worth reading again (`Settle`), what a new snapshot
changed (`snapshot_changes`), which apt run made a dpkg change, and the events
(`PackageEvents`). `adapters/packages.py` is the watcher that reads the logs, the environments,
npm and the state file.
"""


from __future__ import annotations

import hashlib
from collections import Counter
from datetime import datetime
from typing import Any

from totalrecall_schema import MemoryEvent

from .base import EventContext
from .packages_changes import AptRun, PackageChange, describe, diff_snapshots, where_from


class Settle:
    """Whether the directories holding a source's packages may have changed: their mtimes
    differ from the last read that saw them settle (an install adds or removes an entry). A
    change is read twice (now and next poll), because a package's metadata may still be being
    written when its directory appears. Unknown directories (None): always read."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Any, ...]] = {}
        self._settled: dict[str, tuple[Any, ...] | None] = {}

    def changed(self, key: str, mtimes: tuple[Any, ...] | None) -> bool:
        if mtimes is None:
            return True
        if mtimes == self._settled.get(key):
            return False
        self._settled[key] = mtimes if mtimes == self._seen.get(key) else None
        self._seen[key] = mtimes
        return True


def snapshot_changes(states: dict[str, Any], manager: str, env: str,
                     snap: dict[str, str]) -> tuple[list[PackageChange], bool]:
    """What `snap` (package → version) changed since the snapshot kept in `states[env]`, which
    it replaces; and whether `states` changed. The first snapshot is the baseline (no
    history)."""
    prev = states.get(env)
    if prev is None:
        states[env] = {"generation": 0, "packages": snap}
        return [], True
    if prev["packages"] == snap:
        return [], False
    generation = int(prev.get("generation", 0)) + 1
    changes = diff_snapshots(manager, env, prev["packages"], snap, generation)
    states[env] = {"generation": generation, "packages": snap}
    return changes, True


def dpkg_changes_dated(changes: list[PackageChange]) -> list[PackageChange]:
    """The dpkg changes an apt run may have made (those with a time)."""
    return [c for c in changes if c.manager == "dpkg" and c.at is not None]


def match_runs(changes: list[PackageChange], runs: list[AptRun]) -> dict[str, AptRun]:
    """origin → the apt run that made each dpkg change (the latest run that covers it)."""
    out: dict[str, AptRun] = {}
    for c in dpkg_changes_dated(changes):
        run = next((r for r in reversed(runs) if r.covers(c)), None)
        if run is not None:
            out[c.origin] = run
    return out


class PackageEvents:
    """One event per change; more than `max_individual` changes of one manager and environment
    in one poll (an `apt upgrade`) become one summary event. Each names the apt command (and
    user) that asked, when `runs` knows it."""

    def __init__(self, ctx: EventContext, name: str, max_individual: int) -> None:
        self.ctx = ctx
        self.name = name
        self.max_individual = max_individual
        self._runs: dict[str, AptRun] = {}

    def events(self, changes: list[PackageChange], runs: dict[str, AptRun]) -> list[MemoryEvent]:
        self._runs = runs
        groups: dict[tuple[str, str], list[PackageChange]] = {}
        for c in changes:
            groups.setdefault((c.manager, c.environment), []).append(c)
        events: list[MemoryEvent] = []
        for group in groups.values():
            if len(group) <= self.max_individual:
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
