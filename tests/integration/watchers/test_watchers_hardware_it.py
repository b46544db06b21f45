"""A USB device "appears" in a sysfs tree → `system.hardware/usb_attach` arrives on JetStream;
and on this machine the hardware watcher's /health state matches the sources that exist."""

from __future__ import annotations

from pathlib import Path

import httpx
import nats
import psutil
from totalrecall_schema import MemoryEvent, Topology
from watchers_it_helpers import StreamReader, make_settings, running, wait_until


def add_usb(root: Path, name: str, vid: str, pid: str, product: str) -> Path:
    d = root / "bus" / "usb" / "devices" / name
    d.mkdir(parents=True)
    for attr, value in (("idVendor", vid), ("idProduct", pid), ("manufacturer", "Acme"),
                        ("product", product), ("serial", "SN0042"), ("speed", "480")):
        (d / attr).write_text(value + "\n")
    return d


async def test_usb_attach_and_detach_reach_jetstream(nats_url: str, topology: Topology,
                                                     tr_home: Path, tmp_path: Path,
                                                     reader: StreamReader) -> None:
    sysfs = tmp_path / "sys"
    add_usb(sysfs, "usb1", "1d6b", "0002", "xHCI Host Controller")
    add_usb(sysfs, "1-1", "8087", "0024", "Hub")
    settings = make_settings(nats_url, topology, tr_home, enable=("hardware",))
    settings.hardware.interval_s = 0.2
    settings.hardware.sysfs_root = str(sysfs)
    settings.hardware.battery = False  # only the fake tree: deterministic on any machine
    settings.hardware.sensors = False
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["hardware"].last_poll_at is not None, 10,
                         "first hardware poll")
        assert runner.status["hardware"].events == 0  # the baseline is silent
        health = runner.health()["hardware"]
        assert health["state"] == "running" and "USB" in health["note"]

        stick = add_usb(sysfs, "1-1.4", "0781", "5581", "Flash Drive")
        (sysfs / "bus/usb/devices/1-1.4:1.0").mkdir()
        ev, headers = await reader.wait_for(
            lambda e: e.category == "system.hardware" and e.subcategory == "usb_attach", 10,
            "usb_attach")
        assert ev.summary == "USB device attached: Acme Flash Drive (0781:5581) at port 1-1.4"
        extra = ev.metadata.model_extra or {}
        assert extra["vendor_id"] == "0781" and extra["usb_port"] == "1-1.4"
        assert ev.source == "watcher.hardware" and headers.get("Nats-Msg-Id")

        nc = await nats.connect(nats_url)
        try:
            msg = await nc.jetstream().get_last_msg(
                topology.events_stream, topology.events_subject("system.hardware"))
        finally:
            await nc.close()
        assert msg.subject == topology.events_subject("system.hardware")
        assert MemoryEvent.model_validate_json(msg.data).subcategory == "usb_attach"

        for f in stick.iterdir():
            f.unlink()
        stick.rmdir()
        await reader.wait_for(lambda e: e.subcategory == "usb_detach", 10, "usb_detach")
    events = await reader.events()
    assert [e.subcategory for e in events] == ["usb_attach", "usb_detach"]


async def test_health_on_this_machine_is_honest(nats_url: str, topology: Topology,
                                                tr_home: Path) -> None:
    settings = make_settings(nats_url, topology, tr_home, enable=("hardware",))
    async with running(settings) as app:
        runner = app.state.runner
        await wait_until(lambda: runner.status["hardware"].state != "starting", 10,
                         "hardware availability check")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://watchers") as client:
            body = (await client.get("/health")).json()
    hw = body["watchers"]["hardware"]
    sources = {"USB": Path("/sys/bus/usb/devices").is_dir(),
               "battery": psutil.sensors_battery() is not None,
               "temperature sensors": bool(psutil.sensors_temperatures()),
               "fans": bool(psutil.sensors_fans())}
    if any(sources.values()):
        assert hw["state"] == "running", hw
        for name, present in sources.items():
            if present:
                assert name in hw["note"].split("; absent")[0], (name, hw)
    else:
        assert hw["state"] == "unavailable", hw
        assert hw["reason"].startswith("no hardware source on this machine"), hw
        for name in sources:
            assert f"no {name}" in hw["reason"], hw
