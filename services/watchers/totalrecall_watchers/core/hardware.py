"""Hardware watcher: USB attach/detach (sysfs), battery level and AC power, temperatures and fans.

Only changes are emitted (category `system.hardware`):

* `usb_attach` / `usb_detach`: the diff of `<sysfs_root>/bus/usb/devices/*` between two polls.
  Interfaces (`1-1:1.0`) and root hubs (`usb1`) are not devices one plugs in and are skipped;
  the first poll records the devices present without reporting them.
* `battery`: the charge at or below `battery_warn_percent` / `battery_critical_percent` while
  not on AC (also on the first look), once per crossing, and once when it is back above the
  warning level (2 points of hysteresis); `ac_plugged` / `ac_unplugged` when the power source
  changes.
* `sensor_alert`: a temperature sensor reaching its own `high` / `critical` (or
  `temp_warn_c` / `temp_critical_c` when it gives none), once per crossing, and once when it
  is back below the warning level by `temp_hysteresis_c`; a fan reporting 0 rpm after spinning,
  and spinning again.

The watcher is available when at least one source exists (a USB bus in sysfs, a battery, a
temperature sensor or fan); `/health` says which ones it watches. The sources are read by
`adapters/hardware.py`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher

if TYPE_CHECKING:
    from ..settings import HardwareSettings

log = logging.getLogger(__name__)

CATEGORY = "system.hardware"
BATTERY_HYSTERESIS = 2.0
MAX_ATTR_CHARS = 128
MAX_SERIAL_CHARS = 32


@dataclass(frozen=True)
class UsbDevice:
    port: str  # the sysfs name: bus-port[.port…], e.g. "1-1.2"
    vendor_id: str
    product_id: str
    manufacturer: str = ""
    product: str = ""
    serial: str = ""
    speed: str = ""  # Mb/s as sysfs gives it

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.vendor_id, self.product_id, self.serial)

    @property
    def label(self) -> str:
        name = " ".join(x for x in (self.manufacturer, self.product) if x)
        return name or "USB device"


@dataclass(frozen=True)
class Battery:
    percent: float
    plugged: bool | None  # None: unknown


@dataclass(frozen=True)
class Temperature:
    key: str  # "chip/label"
    current: float
    high: float | None = None
    critical: float | None = None


@dataclass(frozen=True)
class Fan:
    key: str  # "chip/label"
    rpm: int


class HardwareSource(Protocol):
    def usb_devices(self) -> dict[str, UsbDevice] | None:
        """The devices by port; None when there is no USB bus in sysfs."""
        ...

    def battery(self) -> Battery | None: ...

    def temperatures(self) -> list[Temperature]: ...

    def fans(self) -> list[Fan]: ...


def _plausible(t: float | None) -> bool:
    return t is not None and math.isfinite(t) and -60.0 < t < 250.0


class HardwareWatcher(Watcher):
    name = "hardware"

    def __init__(self, ctx: EventContext, settings: HardwareSettings,
                 source: HardwareSource) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.source = source
        self.usb: dict[str, UsbDevice] | None = None
        self.bat_level = 0  # 0 ok, 1 warning, 2 critical (with hysteresis)
        self.bat_alerted = 0  # the level last reported in this low-battery episode
        self.plugged: bool | None = None
        self.temp_level: dict[str, int] = {}
        self.fan_rpm: dict[str, int] = {}
        self.fan_stopped: set[str] = set()

    # --- availability ---------------------------------------------------------------------------
    def check_available(self) -> str | None:
        s = self.settings
        found: list[str] = []
        absent: list[str] = []

        def probe(name: str, present: Callable[[], bool]) -> None:
            try:
                ok = present()
            except Exception as exc:  # a source that cannot even be read counts as absent
                log.warning("hardware source %s: %r", name, exc)
                ok = False
            (found if ok else absent).append(name)

        if s.usb:
            probe(f"USB ({Path(s.sysfs_root) / 'bus/usb/devices'})",
                  lambda: self.source.usb_devices() is not None)
        if s.battery:
            probe("battery", lambda: self.source.battery() is not None)
        if s.sensors:
            probe("temperature sensors", lambda: bool(self.source.temperatures()))
            probe("fans", lambda: bool(self.source.fans()))
        if not found:
            if not absent:
                return "every hardware source is disabled (usb, battery, sensors)"
            return "no hardware source on this machine: no " + ", no ".join(absent)
        self.note = "watching: " + ", ".join(found)
        if absent:
            self.note += "; absent: " + ", ".join(absent)
        return None

    # --- polling --------------------------------------------------------------------------------
    def poll(self) -> list[MemoryEvent]:
        events: list[MemoryEvent] = []
        s = self.settings
        steps = [(s.usb, self._poll_usb), (s.battery, self._poll_battery),
                 (s.sensors, self._poll_temperatures), (s.sensors, self._poll_fans)]
        failures: list[str] = []
        for enabled, step in steps:
            if not enabled:
                continue
            try:
                events.extend(step())
            except Exception as exc:  # one broken source must not hide the others
                log.warning("hardware source %s failed: %r", step.__name__, exc)
                failures.append(f"{step.__name__.removeprefix('_poll_')}: {exc!r}"[:200])
        if failures and len(failures) == sum(1 for e, _ in steps if e):
            raise RuntimeError("; ".join(failures))
        return events

    def _poll_usb(self) -> list[MemoryEvent]:
        devs = self.source.usb_devices()
        if devs is None:
            return []
        prev, self.usb = self.usb, devs
        if prev is None:
            return []  # the baseline: what is plugged in at start is not news
        events: list[MemoryEvent] = []
        for port in sorted(set(prev) | set(devs)):
            old, new = prev.get(port), devs.get(port)
            if old is not None and new is not None and old.identity == new.identity:
                continue
            if old is not None:
                events.append(self._usb_event(old, attached=False))
            if new is not None:
                events.append(self._usb_event(new, attached=True))
        return events

    def _usb_event(self, d: UsbDevice, *, attached: bool) -> MemoryEvent:
        verb = "attached" if attached else "detached"
        ids = f"{d.vendor_id}:{d.product_id}"
        detail = "\n".join(f"{k}: {v}" for k, v in (
            ("port", d.port), ("id", ids), ("manufacturer", d.manufacturer),
            ("product", d.product), ("serial", d.serial),
            ("speed", f"{d.speed} Mb/s" if d.speed else "")) if v)
        return self.ctx.event(
            self.name, CATEGORY, "usb_attach" if attached else "usb_detach",
            f"USB device {verb}: {d.label} ({ids}) at port {d.port}", detail=detail,
            tags=["hardware", "usb", verb], vendor_id=d.vendor_id, product_id=d.product_id,
            usb_port=d.port, manufacturer=d.manufacturer, product=d.product, serial=d.serial)

    def _battery_limits(self) -> tuple[float, float, float]:
        warn = self.settings.battery_warn_percent
        crit = min(self.settings.battery_critical_percent, warn)
        hyst = min(BATTERY_HYSTERESIS, (warn - crit) / 5) if warn > crit else BATTERY_HYSTERESIS
        return warn, crit, hyst

    def _poll_battery(self) -> list[MemoryEvent]:
        b = self.source.battery()
        if b is None:
            self.plugged, self.bat_level, self.bat_alerted = None, 0, 0
            return []
        warn, crit, hyst = self._battery_limits()
        pct, prev = b.percent, self.bat_level
        if pct <= crit or (prev == 2 and pct <= crit + hyst):
            level = 2
        elif pct <= warn or (prev >= 1 and pct <= warn + hyst):
            level = 1
        else:
            level = 0
        self.bat_level = level
        events: list[MemoryEvent] = []
        detail = f"charge: {pct:.0f}%\npower: {self._power(b.plugged)}"
        if self.plugged is not None and b.plugged is not None and b.plugged != self.plugged:
            sub = "ac_plugged" if b.plugged else "ac_unplugged"
            what = "AC power plugged in" if b.plugged else "AC power unplugged, on battery"
            events.append(self.ctx.event(self.name, CATEGORY, sub, f"{what} ({pct:.0f}%)",
                                         detail=detail, tags=["hardware", "power", sub],
                                         percent=round(pct, 1), power_plugged=b.plugged))
        if b.plugged is not None:
            self.plugged = b.plugged
        discharging = b.plugged is not True
        if level > self.bat_alerted and discharging:
            self.bat_alerted = level
            sev = Severity.CRITICAL if level == 2 else Severity.WARNING
            name = "critical" if level == 2 else "warning"
            events.append(self.ctx.event(
                self.name, CATEGORY, "battery", f"battery {'critically ' if level == 2 else ''}"
                f"low: {pct:.0f}% and discharging", detail=detail, severity=sev,
                tags=["hardware", "battery", name], percent=round(pct, 1),
                threshold_percent=crit if level == 2 else warn, level=name,
                power_plugged=b.plugged))
        elif level == 0 and self.bat_alerted > 0:
            self.bat_alerted = 0
            events.append(self.ctx.event(
                self.name, CATEGORY, "battery", f"battery back to {pct:.0f}% "
                f"(above {warn:g}%)", detail=detail, tags=["hardware", "battery", "recovered"],
                percent=round(pct, 1), threshold_percent=warn, level="ok",
                power_plugged=b.plugged))
        elif level < self.bat_alerted:
            self.bat_alerted = level  # charged from critical to warning: re-arms critical
        return events

    @staticmethod
    def _power(plugged: bool | None) -> str:
        return {True: "AC", False: "battery", None: "unknown"}[plugged]

    def _temp_limits(self, t: Temperature) -> tuple[float, float]:
        s = self.settings
        warn = t.high if _plausible(t.high) and t.high and t.high > 0 else s.temp_warn_c
        crit = (t.critical if _plausible(t.critical) and t.critical and t.critical > 0
                else s.temp_critical_c)
        return warn, max(crit, warn)

    def _poll_temperatures(self) -> list[MemoryEvent]:
        temps = [t for t in self.source.temperatures() if _plausible(t.current)]
        hyst = self.settings.temp_hysteresis_c
        events: list[MemoryEvent] = []
        seen: set[str] = set()
        for t in temps:
            if t.key in seen:
                continue
            seen.add(t.key)
            warn, crit = self._temp_limits(t)
            prev = self.temp_level.get(t.key, 0)
            if t.current >= crit or (prev == 2 and t.current > crit - hyst):
                level = 2
            elif t.current >= warn or (prev >= 1 and t.current > warn - hyst):
                level = 1
            else:
                level = 0
            self.temp_level[t.key] = level
            if level == prev or 0 < level < prev:
                continue  # no change, or critical → warning (not news)
            detail = (f"sensor: {t.key}\ncurrent: {t.current:.1f} °C\n"
                      f"high: {warn:g} °C\ncritical: {crit:g} °C")
            if level == 0:
                events.append(self.ctx.event(
                    self.name, CATEGORY, "sensor_alert",
                    f"{t.key} back to {t.current:.0f} °C", detail=detail,
                    tags=["hardware", "temperature", "recovered"], sensor=t.key,
                    temperature_c=round(t.current, 1), threshold_c=warn, level="ok"))
                continue
            name = "critical" if level == 2 else "warning"
            limit = crit if level == 2 else warn
            events.append(self.ctx.event(
                self.name, CATEGORY, "sensor_alert",
                f"{t.key} at {t.current:.0f} °C ({name} threshold {limit:g} °C)", detail=detail,
                severity=Severity.CRITICAL if level == 2 else Severity.WARNING,
                tags=["hardware", "temperature", name], sensor=t.key,
                temperature_c=round(t.current, 1), threshold_c=limit, level=name))
        for gone in set(self.temp_level) - seen:
            del self.temp_level[gone]
        return events

    def _poll_fans(self) -> list[MemoryEvent]:
        fans = {f.key: f.rpm for f in self.source.fans()}
        events: list[MemoryEvent] = []
        for key, rpm in sorted(fans.items()):
            prev = self.fan_rpm.get(key)
            if rpm <= 0 and prev is not None and prev > 0:
                self.fan_stopped.add(key)
                events.append(self.ctx.event(
                    self.name, CATEGORY, "sensor_alert", f"fan {key} stopped (0 rpm, was {prev})",
                    detail=f"fan: {key}\nrpm: 0\nprevious rpm: {prev}", severity=Severity.WARNING,
                    tags=["hardware", "fan", "stopped"], sensor=key, rpm=0, level="warning"))
            elif rpm > 0 and key in self.fan_stopped:
                self.fan_stopped.discard(key)
                events.append(self.ctx.event(
                    self.name, CATEGORY, "sensor_alert", f"fan {key} spinning again ({rpm} rpm)",
                    detail=f"fan: {key}\nrpm: {rpm}", tags=["hardware", "fan", "recovered"],
                    sensor=key, rpm=rpm, level="ok"))
        self.fan_rpm = fans
        self.fan_stopped &= set(fans)
        return events
