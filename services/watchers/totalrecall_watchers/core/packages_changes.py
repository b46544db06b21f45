"""Packages watcher, pure: the dpkg log's state machine, apt's history log, snapshot diffs
and how a change is described (the files and commands are read by adapters/packages.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from .scrub import scrub_extra

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


def parse_npm_ls(stdout: str, returncode: int) -> dict[str, str] | None:
    """`npm ls -g --json --depth=0`'s output → name → version; None when it failed (the last
    snapshot is then kept). Raises ValueError when it is not JSON."""
    data = json.loads(stdout or "{}")
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        # A prefix without a `lib/node_modules` yet has no global packages; other errors
        # leave the last snapshot alone.
        return {} if error.get("code") == "ENOENT" else None
    deps = data.get("dependencies")
    if not isinstance(deps, dict):
        return {} if returncode == 0 else None
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


def describe(c: PackageChange) -> str:
    if c.action == "upgrade":
        return f"{c.package} {c.old_version} → {c.version}"
    return f"{c.package} {c.version or c.old_version or ''}".rstrip()


def where_from(c: PackageChange) -> str:
    return {"dpkg": "apt/dpkg", "npm": "npm (global)"}.get(c.manager, c.manager) + (
        f" in {c.environment}" if c.environment and c.manager == "pip" else "")


