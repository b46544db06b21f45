"""Hardware watcher: USB diff of a fake sysfs tree, battery thresholds/AC, sensors and fans."""

from __future__ import annotations

from pathlib import Path

import psutil
from totalrecall_schema import Severity
from totalrecall_watchers.adapters.hardware import SystemHardware, read_usb_devices
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.hardware import (
    Battery,
    Fan,
    HardwareWatcher,
    Temperature,
    UsbDevice,
)
from totalrecall_watchers.settings import HardwareSettings


def ctx() -> EventContext:
    return EventContext(hostname="box", clock=FakeClock())


def add_usb(root: Path, name: str, vid: str = "046d", pid: str = "c52b", *,
            manufacturer: str | None = "Logitech", product: str | None = "USB Receiver",
            serial: str | None = None) -> Path:
    d = root / "bus" / "usb" / "devices" / name
    d.mkdir(parents=True)
    for attr, value in (("idVendor", vid), ("idProduct", pid), ("manufacturer", manufacturer),
                        ("product", product), ("serial", serial), ("speed", "12")):
        if value is not None:
            (d / attr).write_text(value + "\n")
    return d


def remove(d: Path) -> None:
    for f in d.iterdir():
        f.unlink()
    d.rmdir()


class FakeSensors:
    """Battery, temperatures and fans; USB from the real sysfs reader on a tmp tree."""

    def __init__(self, sysfs_root: Path | None = None) -> None:
        self.sys = SystemHardware(str(sysfs_root)) if sysfs_root else None
        self.bat: Battery | None = None
        self.temps: list[Temperature] = []
        self.fan_list: list[Fan] = []

    def usb_devices(self) -> dict[str, UsbDevice] | None:
        return self.sys.usb_devices() if self.sys else None

    def battery(self) -> Battery | None:
        return self.bat

    def temperatures(self) -> list[Temperature]:
        return list(self.temps)

    def fans(self) -> list[Fan]:
        return list(self.fan_list)


# --- USB --------------------------------------------------------------------------------------
def test_usb_baseline_is_silent_then_attach_and_detach(tmp_path: Path) -> None:
    add_usb(tmp_path, "usb1", "1d6b", "0002", manufacturer="Linux", product="xHCI Host")
    add_usb(tmp_path, "1-1", "8087", "0024", manufacturer=None, product="Hub")
    (tmp_path / "bus/usb/devices/1-1:1.0").mkdir()  # an interface: no idVendor
    w = HardwareWatcher(ctx(), HardwareSettings(sysfs_root=str(tmp_path)),
                        source=FakeSensors(tmp_path))
    assert w.check_available() is None
    assert w.note and "USB" in w.note and "absent: battery" in w.note
    assert w.poll() == []  # baseline
    assert w.poll() == []

    key = add_usb(tmp_path, "1-1.2", "0781", "5581", manufacturer="SanDisk", product="Ultra",
                  serial="4C530001234567890123456789012345678999")
    iface = tmp_path / "bus/usb/devices/1-1.2:1.0"
    iface.mkdir()
    (iface / "idVendor").write_text("0781\n")  # even one with ids is skipped
    add_usb(tmp_path, "usb2", "1d6b", "0003")  # a new root hub is not a device
    [ev] = w.poll()
    assert (ev.category, ev.subcategory) == ("system.hardware", "usb_attach")
    assert ev.summary == "USB device attached: SanDisk Ultra (0781:5581) at port 1-1.2"
    extra = ev.metadata.model_extra or {}
    assert extra["vendor_id"] == "0781" and extra["product_id"] == "5581"
    assert extra["usb_port"] == "1-1.2" and extra["manufacturer"] == "SanDisk"
    assert len(extra["serial"]) <= 32
    assert ev.severity == Severity.INFO and "usb" in ev.metadata.tags
    assert w.poll() == []

    remove(key)
    [ev] = w.poll()
    assert ev.subcategory == "usb_detach"
    assert ev.summary == "USB device detached: SanDisk Ultra (0781:5581) at port 1-1.2"


def test_usb_swap_on_same_port_is_detach_plus_attach(tmp_path: Path) -> None:
    d = add_usb(tmp_path, "2-3", "1111", "2222", product="Keyboard")
    w = HardwareWatcher(ctx(), HardwareSettings(), source=FakeSensors(tmp_path))
    w.poll()
    remove(d)
    add_usb(tmp_path, "2-3", "3333", "4444", manufacturer=None, product=None)
    evs = w.poll()
    assert [e.subcategory for e in evs] == ["usb_detach", "usb_attach"]
    assert "USB device (3333:4444)" in evs[1].summary


def test_read_usb_devices_lowercases_and_skips_incomplete(tmp_path: Path) -> None:
    add_usb(tmp_path, "3-1", "ABCD", "EF01")
    (tmp_path / "bus/usb/devices/3-2").mkdir()  # vanished mid-read: no attributes
    devs = read_usb_devices(tmp_path / "bus/usb/devices")
    assert list(devs) == ["3-1"] and devs["3-1"].vendor_id == "abcd"


# --- availability -----------------------------------------------------------------------------
def test_unavailable_without_any_source(tmp_path: Path) -> None:
    w = HardwareWatcher(ctx(), HardwareSettings(sysfs_root=str(tmp_path)),
                        source=FakeSensors(tmp_path))
    reason = w.check_available()
    assert reason and "no USB" in reason and "no battery" in reason
    assert "no temperature sensors" in reason and "no fans" in reason
    off = HardwareSettings(usb=False, battery=False, sensors=False)
    assert "disabled" in (HardwareWatcher(ctx(), off, source=FakeSensors()).check_available()
                          or "")


def test_available_with_only_a_battery_or_only_sensors() -> None:
    src = FakeSensors()
    src.bat = Battery(80, True)
    w = HardwareWatcher(ctx(), HardwareSettings(), source=src)
    assert w.check_available() is None and w.note and w.note.startswith("watching: battery")
    src2 = FakeSensors()
    src2.fan_list = [Fan("thinkpad/fan1", 2000)]
    assert HardwareWatcher(ctx(), HardwareSettings(), source=src2).check_available() is None
    assert HardwareWatcher(ctx(), HardwareSettings(sensors=False),
                           source=src2).check_available() is not None


def test_real_source_runs_and_reports_honestly() -> None:
    s = HardwareSettings()
    w = HardwareWatcher(ctx(), s, source=SystemHardware(s.sysfs_root))
    reason = w.check_available()
    has_any = (Path("/sys/bus/usb/devices").is_dir() or psutil.sensors_battery() is not None
               or bool(psutil.sensors_temperatures()) or bool(psutil.sensors_fans()))
    assert (reason is None) == has_any, reason
    if reason is None:
        assert w.poll() == [] or all(e.category == "system.hardware" for e in w.poll())


# --- battery ----------------------------------------------------------------------------------
def test_battery_thresholds_hysteresis_recovery_and_ac() -> None:
    src = FakeSensors()
    w = HardwareWatcher(ctx(), HardwareSettings(), source=src)

    def at(pct: float, plugged: bool | None) -> list[tuple[str, str, str]]:
        src.bat = Battery(pct, plugged)
        return [(e.subcategory, e.severity.value, (e.metadata.model_extra or {}).get("level", ""))
                for e in w.poll()]

    assert at(50, False) == []
    assert at(21, False) == []
    assert at(20, False) == [("battery", "warning", "warning")]
    assert at(19, False) == []
    assert at(10, False) == [("battery", "critical", "critical")]
    assert at(8, False) == []
    assert at(8, True) == [("ac_plugged", "info", "")]  # plugging in is the news
    assert at(11, True) == []  # charging through critical: no alert, critical re-armed
    assert at(21, True) == []  # inside hysteresis (20 + 2)
    assert at(23, True) == [("battery", "info", "ok")]
    assert at(23, False) == [("ac_unplugged", "info", "")]
    assert at(20, False) == [("battery", "warning", "warning")]
    assert at(12, True) == [("ac_plugged", "info", "")]
    assert at(12, False) == [("ac_unplugged", "info", "")]  # still warning: already told
    assert at(9, False) == [("battery", "critical", "critical")]


def test_battery_low_at_start_is_reported_but_not_when_on_ac() -> None:
    src = FakeSensors()
    src.bat = Battery(5, False)
    w = HardwareWatcher(ctx(), HardwareSettings(battery_warn_percent=30,
                                                battery_critical_percent=15), source=src)
    [ev] = w.poll()
    assert ev.severity == Severity.CRITICAL and "5%" in ev.summary
    assert (ev.metadata.model_extra or {})["threshold_percent"] == 15
    src2 = FakeSensors()
    src2.bat = Battery(5, True)
    assert HardwareWatcher(ctx(), HardwareSettings(), source=src2).poll() == []


# --- temperatures and fans --------------------------------------------------------------------
def test_temperature_own_limits_hysteresis_and_recovery() -> None:
    src = FakeSensors()
    w = HardwareWatcher(ctx(), HardwareSettings(temp_hysteresis_c=5), source=src)

    def at(c: float) -> list[tuple[str, str]]:
        src.temps = [Temperature("coretemp/Package id 0", c, high=80, critical=100)]
        return [(e.severity.value, (e.metadata.model_extra or {})["level"]) for e in w.poll()]

    assert at(60) == []
    assert at(80) == [("warning", "warning")]
    assert at(78) == []  # hysteresis
    assert at(81) == []
    assert at(100) == [("critical", "critical")]
    assert at(97) == []
    assert at(90) == []  # critical → warning is not news
    assert at(76) == []
    assert at(75) == [("info", "ok")]
    assert at(80) == [("warning", "warning")]


def test_temperature_configured_limits_when_sensor_gives_none() -> None:
    src = FakeSensors()
    src.temps = [Temperature("acpitz/0", 90.0, high=None, critical=0.0),
                 Temperature("nvme/Composite", -273.0),  # a bogus reading is ignored
                 Temperature("cpu/0", 50.0, high=None, critical=None)]
    w = HardwareWatcher(ctx(), HardwareSettings(temp_warn_c=85, temp_critical_c=95), source=src)
    [ev] = w.poll()  # already hot at start: reported
    assert ev.subcategory == "sensor_alert" and ev.severity == Severity.WARNING
    extra = ev.metadata.model_extra or {}
    assert extra["sensor"] == "acpitz/0" and extra["threshold_c"] == 85
    assert "acpitz/0 at 90 °C" in ev.summary
    src.temps = [Temperature("acpitz/0", 96.0)]
    [ev] = w.poll()
    assert ev.severity == Severity.CRITICAL and (ev.metadata.model_extra or {})["threshold_c"] == 95


def test_fan_stopping_and_restarting() -> None:
    src = FakeSensors()
    src.fan_list = [Fan("thinkpad/fan1", 0), Fan("thinkpad/fan2", 2400)]
    w = HardwareWatcher(ctx(), HardwareSettings(), source=src)
    assert w.poll() == []  # a fan idle from the start is not news
    src.fan_list = [Fan("thinkpad/fan1", 0), Fan("thinkpad/fan2", 0)]
    [ev] = w.poll()
    assert ev.severity == Severity.WARNING and "fan thinkpad/fan2 stopped" in ev.summary
    assert w.poll() == []
    src.fan_list = [Fan("thinkpad/fan1", 1200), Fan("thinkpad/fan2", 2000)]
    [ev] = w.poll()
    assert ev.summary == "fan thinkpad/fan2 spinning again (2000 rpm)"
    assert (ev.metadata.model_extra or {})["level"] == "ok"


def test_one_broken_source_does_not_hide_the_others(tmp_path: Path) -> None:
    class Broken(FakeSensors):
        def temperatures(self) -> list[Temperature]:
            raise OSError("hwmon read failed")

    src = Broken(tmp_path)
    add_usb(tmp_path, "1-1")
    w = HardwareWatcher(ctx(), HardwareSettings(), source=src)
    assert w.poll() == []
    add_usb(tmp_path, "1-2", "aaaa", "bbbb")
    assert [e.subcategory for e in w.poll()] == ["usb_attach"]
