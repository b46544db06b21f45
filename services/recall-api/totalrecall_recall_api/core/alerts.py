"""Proactive alerts: small pure rules over the stored events (the watchers' own shapes).

Each rule reads rows of the `memories` table (one row may stand for `repeat_count` folded
events) and returns alerts whose id is `rule:subject`, so the same condition found again is the
same alert. Which events each rule reads, as the watchers emit them:

* `disk_filling` — `system.storage/space_warning|inode_warning` (storage watcher): it reports a
  filesystem crossing into warning/critical and once when it is back below (`level` "ok").
  Open while the newest report of a filesystem is warning/critical; with two or more rising
  reports since the last "ok", the trend projects when it is full. Resolved by an "ok" report
  or by the filesystem's `unmount`.
* `unit_failing` — `system.service/fail` (services and journal watchers) and `cron/failed`
  (timers watcher), per unit (`metadata.service`); `system.service/start` and `cron/executed`
  are its successes. Open when the unit failed at least N times in the window and its newest
  event is a failure; resolved once a success is newer.
* `process_crashing` — `system.process/crash` (process watcher), `system.process/oom_kill`
  (journal, the kernel's OOM killer) and systemd-coredump's "Process N (name) … dumped core"
  (journal, `error`), per process name. Open while N crashes fall in the window.
* `service_idle` — a unit whose newest state event says it is active, with no event about it
  (any category, `metadata.service`) for N days.

One failure is often reported by several watchers (the timer's result and the journal's
"Failed with result"): a count is the largest count of any one source, never their sum.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from totalrecall_schema import Alert

STORAGE_SUBCATEGORIES = ("space_warning", "inode_warning")
UNIT_FAILURES = frozenset({("system.service", "fail"), ("cron", "failed")})
UNIT_SUCCESSES = frozenset({("system.service", "start"), ("cron", "executed")})
PROCESS_CRASHES = frozenset({("system.process", "crash"), ("system.process", "oom_kill")})
COREDUMP_IDENTIFIER = "systemd-coredump"
_COREDUMP = re.compile(r"Process \d+ \((?P<name>[^)]{1,200})\) of user \S+ "
                       r"(?:dumped core|terminated abnormally)")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}
MAX_EVIDENCE = 5


@dataclass(frozen=True)
class EventRow:
    """The fields of a stored memory the rules read."""

    id: str
    ts: datetime
    category: str
    subcategory: str
    summary: str = ""
    source: str = ""
    severity: str = "info"
    service: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    namespace: str = "default"
    repeat_count: int = 1
    last_seen: datetime | None = None

    @property
    def latest(self) -> datetime:
        """When it was last seen (a folded memory's last repeat)."""
        return max(self.ts, self.last_seen) if self.last_seen else self.ts

    @property
    def unit(self) -> str | None:
        return self.service or _str(self.metadata.get("service"))


@dataclass(frozen=True)
class Thresholds:
    """The rules' knobs (`TR_RECALL_ALERTS_*`)."""

    disk_full_days: float = 7.0
    unit_failures: int = 3
    unit_window: timedelta = timedelta(days=7)
    crash_count: int = 3
    crash_window: timedelta = timedelta(hours=24)
    idle_days: float = 21.0
    #: reclaimable_space opens at this many reclaimable bytes (0: off).
    reclaimable_bytes: int = 2 * 2**30


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _evidence(rows: Iterable[EventRow]) -> list[str]:
    return [r.id for r in sorted(rows, key=lambda r: r.latest, reverse=True)][:MAX_EVIDENCE]


def _largest_source_count(rows: Sequence[EventRow]) -> int:
    """Occurrences behind `rows`: the largest count any one source reported (several watchers
    report the same failure), each row counting its folded repeats."""
    per_source: dict[str, int] = defaultdict(int)
    for r in rows:
        per_source[r.source] += max(1, r.repeat_count)
    return max(per_source.values(), default=0)


def _when(ts: datetime) -> str:
    return f"{ts:%Y-%m-%d %H:%M} UTC"


# --- disk filling ------------------------------------------------------------------------------
def _level(r: EventRow) -> str:
    level = _str(r.metadata.get("level"))
    if level:
        return level
    return "ok" if r.severity == "info" else "critical" if r.severity == "critical" else "warning"


def _percent(r: EventRow) -> float | None:
    v = r.metadata.get("percent")
    return float(v) if isinstance(v, int | float) else None


def days_to_full(points: Sequence[tuple[datetime, float]]) -> tuple[float, float] | None:
    """(points per day, days until 100 %) from the first and last of rising reports, or None
    when there is no rise to project."""
    if len(points) < 2:
        return None
    (t0, p0), (t1, p1) = points[0], points[-1]
    days = (t1 - t0).total_seconds() / 86400
    if days <= 0 or p1 <= p0:
        return None
    rate = (p1 - p0) / days
    return rate, max(0.0, (100.0 - p1) / rate)


def _since_last_ok(reports: Sequence[EventRow]) -> list[EventRow]:
    """The reports of the current episode: those after the last "back to normal" (in order)."""
    oks = [i for i, r in enumerate(reports) if _level(r) == "ok"]
    return list(reports[oks[-1] + 1:] if oks else reports)


def disk_filling(rows: Sequence[EventRow], now: datetime, t: Thresholds) -> list[Alert]:
    by_fs: dict[tuple[str, str], list[EventRow]] = defaultdict(list)
    unmounted: dict[str, EventRow] = {}
    for r in rows:
        path = _str(r.metadata.get("path"))
        if r.category != "system.storage" or not path:
            continue
        if r.subcategory in STORAGE_SUBCATEGORIES:
            by_fs[(r.subcategory, path)].append(r)
        elif r.subcategory == "unmount" and (path not in unmounted
                                             or unmounted[path].ts < r.ts):
            unmounted[path] = r
    alerts: list[Alert] = []
    for (sub, path), reports in by_fs.items():
        reports.sort(key=lambda r: r.ts)
        subject = path if sub == "space_warning" else f"{path} (inodes)"
        newest = reports[-1]
        gone = unmounted.get(path)
        if gone is not None and gone.ts >= newest.ts:  # unmounted since: nothing to fill
            reports = [*reports, gone]
            newest = gone
        if newest is gone or _level(newest) == "ok":
            episode = _since_last_ok(reports[:-1])
            if episode:
                alerts.append(Alert(
                    id=f"disk_filling:{subject}", rule="disk_filling", subject=subject,
                    namespace=newest.namespace, state="resolved", severity="info",
                    text=_one_line(newest.summary),  # "/home space usage back to 80%"
                    first_seen=episode[0].ts, last_seen=episode[-1].latest,
                    count=len(episode), resolved_at=newest.ts,
                    evidence=_evidence([*episode, newest])))
            continue
        episode = _since_last_ok(reports)
        points = [(r.ts, p) for r in episode if (p := _percent(r)) is not None]
        level = _level(newest)
        text = _one_line(newest.summary)  # the watcher's "/srv at 93% capacity, 7 GiB remaining"
        severity = "critical" if level == "critical" else "warning"
        trend = days_to_full(points)
        if trend is not None:
            rate, left = trend
            text += f"; rising {rate:.1f} points/day since {_when(points[0][0])}: " \
                    f"full in ~{left:.1f} days"
            if left <= t.disk_full_days:
                severity = "critical"
        alerts.append(Alert(
            id=f"disk_filling:{subject}", rule="disk_filling", subject=subject,
            namespace=newest.namespace, severity=severity, text=_one_line(text, 240),
            first_seen=episode[0].ts, last_seen=newest.latest, count=len(episode),
            evidence=_evidence(episode)))
    return alerts


# --- a unit that keeps failing -----------------------------------------------------------------
def unit_failing(rows: Sequence[EventRow], now: datetime, t: Thresholds) -> list[Alert]:
    since = now - t.unit_window
    fails: dict[str, list[EventRow]] = defaultdict(list)
    oks: dict[str, list[EventRow]] = defaultdict(list)
    for r in rows:
        unit = r.unit
        if unit is None or r.latest < since:
            continue
        kind = (r.category, r.subcategory)
        if kind in UNIT_FAILURES:
            fails[unit].append(r)
        elif kind in UNIT_SUCCESSES:
            oks[unit].append(r)
    alerts: list[Alert] = []
    for unit, failed in fails.items():
        count = _largest_source_count(failed)
        if count < t.unit_failures:
            continue
        failed.sort(key=lambda r: r.latest)
        last_fail = failed[-1]
        last_ok = max(oks.get(unit, []), key=lambda r: r.latest, default=None)
        resolved = last_ok is not None and last_ok.latest > last_fail.latest
        first = min(r.ts for r in failed)
        if resolved and last_ok is not None:
            alerts.append(Alert(
                id=f"unit_failing:{unit}", rule="unit_failing", subject=unit,
                namespace=last_fail.namespace, state="resolved", severity="info",
                text=_one_line(f"{unit} works again after {count} failures since {_when(first)}: "
                               f"{last_ok.summary}", 240),
                first_seen=first, last_seen=last_fail.latest, count=count,
                resolved_at=last_ok.latest, evidence=_evidence([*failed, last_ok])))
            continue
        alerts.append(Alert(
            id=f"unit_failing:{unit}", rule="unit_failing", subject=unit,
            namespace=last_fail.namespace, severity="error",
            text=_one_line(f"{unit} failed {count} times since {_when(first)}, the last at "
                           f"{_when(last_fail.latest)}: {last_fail.summary}", 240),
            first_seen=first, last_seen=last_fail.latest, count=count,
            evidence=_evidence(failed)))
    return alerts


# --- a process that keeps crashing -------------------------------------------------------------
def crashed_process(r: EventRow) -> str | None:
    """The name of the process a crash report is about, or None when `r` is not one."""
    if (r.category, r.subcategory) in PROCESS_CRASHES:
        return _str(r.metadata.get("process"))
    if r.category == "error" and r.metadata.get("identifier") == COREDUMP_IDENTIFIER:
        m = _COREDUMP.search(r.summary)
        return m.group("name") if m else None
    return None


def process_crashing(rows: Sequence[EventRow], now: datetime, t: Thresholds) -> list[Alert]:
    since = now - t.crash_window
    crashes: dict[str, list[EventRow]] = defaultdict(list)
    for r in rows:
        name = crashed_process(r)
        if name is not None and r.latest >= since:
            crashes[name].append(r)
    alerts: list[Alert] = []
    hours = t.crash_window.total_seconds() / 3600
    for name, found in crashes.items():
        count = _largest_source_count(found)
        if count < t.crash_count:
            continue
        found.sort(key=lambda r: r.latest)
        last = found[-1]
        alerts.append(Alert(
            id=f"process_crashing:{name}", rule="process_crashing", subject=name,
            namespace=last.namespace, severity="error",
            text=_one_line(f"{name} crashed {count} times in the last {hours:g} h, the last at "
                           f"{_when(last.latest)}: {last.summary}", 240),
            first_seen=min(r.ts for r in found), last_seen=last.latest, count=count,
            evidence=_evidence(found)))
    return alerts


# --- a service running idle --------------------------------------------------------------------
def service_idle(states: Sequence[EventRow], last_activity: Mapping[str, datetime],
                 now: datetime, t: Thresholds) -> list[Alert]:
    """`states`: each unit's newest `system.service` event; `last_activity`: the newest event
    of any kind about each unit (may omit units with nothing newer than their state)."""
    cutoff = now - timedelta(days=t.idle_days)
    alerts: list[Alert] = []
    for s in states:
        unit = s.unit
        running = s.metadata.get("active") == "active" or s.subcategory == "start"
        if unit is None or not running:
            continue
        last = max(s.latest, last_activity.get(unit, s.latest))
        if last > cutoff:
            continue
        days = (now - last).total_seconds() / 86400
        alerts.append(Alert(
            id=f"service_idle:{unit}", rule="service_idle", subject=unit,
            namespace=s.namespace, severity="info",
            text=_one_line(f"{unit} is running but nothing about it was recorded for "
                           f"{days:.0f} days (since {_when(last)}); is it still needed?", 240),
            first_seen=s.ts, last_seen=last, count=1, evidence=[s.id]))
    return alerts


# --- space that could be freed ------------------------------------------------------------------
def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def reclaimable_space(rows: Sequence[EventRow], filling: Sequence[Alert],
                      t: Thresholds) -> list[Alert]:
    """The newest reclaimable report (`system.storage/reclaimable`: what caches, the journal and
    old generations hold, measured by the watchers) at `reclaimable_bytes` or more: one advice,
    its biggest items with the command that frees each. Advice only: nothing is deleted. A
    warning while a filesystem is filling, else info; resolved once a report says less."""
    if t.reclaimable_bytes <= 0:
        return []
    reports = sorted((r for r in rows if r.category == "system.storage"
                      and r.subcategory == "reclaimable"), key=lambda r: r.ts)
    if not reports:
        return []
    newest = reports[-1]
    total = newest.metadata.get("total_bytes")
    if not isinstance(total, int):
        return []
    items = [i for i in newest.metadata.get("items") or [] if isinstance(i, dict)]
    subject = _str(newest.metadata.get("host")) or "this machine"
    if total < t.reclaimable_bytes:
        before = [r for r in reports[:-1] if isinstance(r.metadata.get("total_bytes"), int)
                  and r.metadata["total_bytes"] >= t.reclaimable_bytes]
        if not before:
            return []
        return [Alert(id=f"reclaimable_space:{subject}", rule="reclaimable_space",
                      subject=subject, namespace=newest.namespace, state="resolved",
                      severity="info", text=_one_line(newest.summary),
                      first_seen=before[0].ts, last_seen=before[-1].ts, count=len(before),
                      resolved_at=newest.ts, evidence=_evidence([before[-1], newest]))]
    parts = []
    for i in sorted(items, key=lambda i: -int(i.get("bytes") or 0))[:3]:
        size = _human(int(i.get("bytes") or 0)) if i.get("count") is None \
            else f"{i['count']} old generations"
        parts.append(f"{i.get('what')} {size} (`{i.get('command')}`)")
    open_disks = [a.subject for a in filling if a.state == "open"]
    text = f"{_human(total)} could be freed: {'; '.join(parts)}. Advice only: nothing is deleted"
    if open_disks:
        text += f"; {', '.join(open_disks)} is filling"
    episode = [newest]
    for r in reversed(reports[:-1]):  # the reports at or over the mark, back to the last under
        if not isinstance(r.metadata.get("total_bytes"), int) \
                or r.metadata["total_bytes"] < t.reclaimable_bytes:
            break
        episode.insert(0, r)
    return [Alert(id=f"reclaimable_space:{subject}", rule="reclaimable_space", subject=subject,
                  namespace=newest.namespace, severity="warning" if open_disks else "info",
                  text=_one_line(text, 300), first_seen=episode[0].ts, last_seen=newest.ts,
                  count=len(episode), evidence=_evidence([newest]))]


def detect(rows: Sequence[EventRow], states: Sequence[EventRow],
           last_activity: Mapping[str, datetime], now: datetime, t: Thresholds) -> list[Alert]:
    """Every rule over one namespace's rows: open alerts first, the most severe and newest
    first; each id once."""
    filling = disk_filling(rows, now, t)
    found = [*filling, *unit_failing(rows, now, t), *process_crashing(rows, now, t),
             *service_idle(states, last_activity, now, t),
             *reclaimable_space(rows, filling, t)]
    return sort_alerts(found)


def sort_alerts(alerts: Iterable[Alert]) -> list[Alert]:
    unique: dict[tuple[str, str], Alert] = {}
    for a in alerts:
        unique.setdefault((a.namespace, a.id), a)
    return sorted(unique.values(), key=lambda a: (
        a.state != "open", -SEVERITY_RANK.get(a.severity, 0), -a.last_seen.timestamp()))
