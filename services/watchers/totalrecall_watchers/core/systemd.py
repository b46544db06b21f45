"""Service watcher (systemd unit state changes) and timer watcher (`systemctl list-timers`).

Both need systemd as PID 1 (`/run/systemd/system` exists, the check sd_booted() makes); without
it they report themselves unavailable. `adapters/systemd.py` runs systemctl and makes that check;
`container.py` hands both in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher

#: None when the source is there, else the reason it is not.
Availability = Callable[[], str | None]
TRANSIENT = {"activating", "deactivating", "reloading", "refreshing"}


@dataclass(frozen=True)
class UnitState:
    load: str
    active: str
    sub: str
    description: str = ""


class UnitSource(Protocol):
    def units(self) -> dict[str, UnitState]: ...


def units_from_json(text: str) -> dict[str, UnitState]:
    """`systemctl list-units --output=json` → units by name (ValueError, KeyError or TypeError
    when it is not that JSON: an older systemd prints a table, `parse_plain_units`)."""
    return {r["unit"]: UnitState(r.get("load", ""), r.get("active", ""), r.get("sub", ""),
                                 r.get("description", "")) for r in json.loads(text)}


def parse_plain_units(text: str) -> dict[str, UnitState]:
    units: dict[str, UnitState] = {}
    for line in text.splitlines():
        parts = line.replace("●", " ").split(None, 4)
        if len(parts) >= 4 and "." in parts[0]:
            units[parts[0]] = UnitState(parts[1], parts[2], parts[3],
                                        parts[4] if len(parts) > 4 else "")
    return units


class ServicesWatcher(Watcher):
    name = "services"

    def __init__(self, ctx: EventContext, *, source: UnitSource, interval_s: float = 60.0,
                 available: Availability | None = None) -> None:
        super().__init__(ctx)
        self.interval_s = interval_s
        self.source = source
        self.available = available
        self.prev: dict[str, UnitState] | None = None

    def check_available(self) -> str | None:
        return self.available() if self.available else None

    def poll(self) -> list[MemoryEvent]:
        units = self.source.units()
        events: list[MemoryEvent] = []
        if self.prev is None:
            self.prev = {k: v for k, v in units.items() if v.active not in TRANSIENT}
            return events
        for unit, new in units.items():
            if new.active in TRANSIENT:
                continue
            old = self.prev.get(unit)
            self.prev[unit] = new
            if old is None:
                if new.active == "failed":
                    events.append(self._event(unit, None, new))
                continue
            if (old.active, old.sub) != (new.active, new.sub):
                events.append(self._event(unit, old, new))
        for unit in [u for u in self.prev if u not in units]:
            del self.prev[unit]
        return events

    def _event(self, unit: str, old: UnitState | None, new: UnitState) -> MemoryEvent:
        was = f"{old.active} ({old.sub})" if old else "unknown"
        now = f"{new.active} ({new.sub})"
        if new.active == "failed":
            sub, sev, verb = "fail", Severity.ERROR, "failed"
        elif new.active == "active" and (old is None or old.active != "active"):
            sub, sev, verb = "start", Severity.INFO, "started"
        elif new.active == "inactive" and old is not None and old.active != "inactive":
            sub, sev, verb = "stop", Severity.INFO, "stopped"
        else:
            sub, sev, verb = "status_change", Severity.INFO, f"is now {now}"
        detail = f"unit: {unit}\ndescription: {new.description}\nwas: {was}\nnow: {now}"
        return self.ctx.event(self.name, "system.service", sub, f"{unit} {verb} (was {was})",
                              detail=detail, severity=sev, service=unit,
                              tags=["systemd", "service", sub], active=new.active, sub=new.sub)


@dataclass(frozen=True)
class TimerState:
    unit: str
    activates: str
    last: str | None
    next: str | None


class TimerSource(Protocol):
    def timers(self) -> dict[str, TimerState]: ...

    def result(self, unit: str) -> str: ...


def timers_from_json(text: str) -> dict[str, TimerState]:
    """`systemctl list-timers --output=json` → timers by unit ("n/a" and 0: never / not
    scheduled)."""
    out: dict[str, TimerState] = {}
    for r in json.loads(text):
        unit = r.get("unit")
        if unit:
            last, nxt = r.get("last"), r.get("next")
            out[unit] = TimerState(unit, r.get("activates") or "",
                                   None if last in (None, 0, "n/a") else str(last),
                                   None if nxt in (None, 0, "n/a") else str(nxt))
    return out


class TimersWatcher(Watcher):
    name = "timers"

    def __init__(self, ctx: EventContext, *, source: TimerSource, interval_s: float = 60.0,
                 available: Availability | None = None) -> None:
        super().__init__(ctx)
        self.interval_s = interval_s
        self.source = source
        self.available = available
        self.prev: dict[str, TimerState] | None = None

    def check_available(self) -> str | None:
        return self.available() if self.available else None

    def poll(self) -> list[MemoryEvent]:
        timers = self.source.timers()
        events: list[MemoryEvent] = []
        if self.prev is None:
            self.prev = timers
            return events
        for unit, t in timers.items():
            old = self.prev.get(unit)
            if old is None:
                events.append(self.ctx.event(
                    self.name, "cron", "scheduled", f"timer {unit} added (runs {t.activates})",
                    detail=f"timer: {unit}\nactivates: {t.activates}\nnext run: {t.next}",
                    service=t.activates, tags=["systemd", "timer"], timer=unit))
            elif t.last and t.last != old.last:
                result = self.source.result(t.activates) if t.activates else "unknown"
                ok = result in ("success", "unknown")
                events.append(self.ctx.event(
                    self.name, "cron", "executed" if ok else "failed",
                    f"timer {unit} ran {t.activates}" + ("" if ok else f": result {result}"),
                    detail=(f"timer: {unit}\nactivates: {t.activates}\nresult: {result}\n"
                            f"last run: {t.last}\nnext run: {t.next}"),
                    severity=Severity.INFO if ok else Severity.ERROR, service=t.activates,
                    tags=["systemd", "timer"], timer=unit, result=result))
        self.prev = timers
        return events
