"""The hardware the watcher reads: USB devices from sysfs (`<sysfs_root>/bus/usb/devices`), the
battery, temperature sensors and fans from psutil."""

from __future__ import annotations

from pathlib import Path

import psutil

from ..core.hardware import MAX_ATTR_CHARS, MAX_SERIAL_CHARS, Battery, Fan, Temperature, UsbDevice


def _read_attr(d: Path, name: str) -> str:
    try:
        return (d / name).read_text(errors="replace").strip()[:MAX_ATTR_CHARS]
    except OSError:
        return ""


def read_usb_devices(devices_dir: Path) -> dict[str, UsbDevice]:
    """The USB devices listed in a sysfs `bus/usb/devices` directory (no interfaces/root hubs)."""
    out: dict[str, UsbDevice] = {}
    try:
        entries = sorted(devices_dir.iterdir())
    except OSError:
        return out
    for entry in entries:
        name = entry.name
        if ":" in name or name.startswith("usb"):
            continue  # an interface of a device, or a root hub (the host controller)
        vendor = _read_attr(entry, "idVendor")
        product_id = _read_attr(entry, "idProduct")
        if not vendor or not product_id:
            continue  # gone while reading, or not a device
        out[name] = UsbDevice(
            port=name, vendor_id=vendor.lower(), product_id=product_id.lower(),
            manufacturer=_read_attr(entry, "manufacturer"), product=_read_attr(entry, "product"),
            serial=_read_attr(entry, "serial")[:MAX_SERIAL_CHARS], speed=_read_attr(entry, "speed"))
    return out


class SystemHardware:
    """The real sources: sysfs for USB, psutil for battery, temperatures and fans."""

    def __init__(self, sysfs_root: str = "/sys") -> None:
        self.usb_dir = Path(sysfs_root) / "bus" / "usb" / "devices"

    def usb_devices(self) -> dict[str, UsbDevice] | None:
        if not self.usb_dir.is_dir():
            return None
        return read_usb_devices(self.usb_dir)

    def battery(self) -> Battery | None:
        fn = getattr(psutil, "sensors_battery", None)
        b = fn() if fn else None
        if b is None:
            return None
        return Battery(float(b.percent), b.power_plugged)

    def temperatures(self) -> list[Temperature]:
        fn = getattr(psutil, "sensors_temperatures", None)
        out: list[Temperature] = []
        for chip, readings in (fn() if fn else {}).items():
            for i, r in enumerate(readings):
                out.append(Temperature(f"{chip}/{r.label or i}", r.current, r.high, r.critical))
        return out

    def fans(self) -> list[Fan]:
        fn = getattr(psutil, "sensors_fans", None)
        out: list[Fan] = []
        for chip, readings in (fn() if fn else {}).items():
            for i, r in enumerate(readings):
                out.append(Fan(f"{chip}/{r.label or i}", int(r.current)))
        return out
