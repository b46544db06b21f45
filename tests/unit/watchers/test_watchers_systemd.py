from __future__ import annotations

from totalrecall_schema import Severity
from totalrecall_watchers.adapters.systemd import systemd_unavailable_reason
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.core.systemd import (
    ServicesWatcher,
    TimerState,
    TimersWatcher,
    UnitState,
    parse_plain_units,
)


class Units:
    def __init__(self) -> None:
        self.data: dict[str, UnitState] = {}

    def units(self) -> dict[str, UnitState]:
        return dict(self.data)


def test_service_state_changes() -> None:
    src = Units()
    src.data = {"postgresql.service": UnitState("loaded", "active", "running", "PostgreSQL"),
                "nginx.service": UnitState("loaded", "inactive", "dead", "nginx"),
                "cron.service": UnitState("loaded", "active", "running", "cron")}
    w = ServicesWatcher(EventContext(clock=FakeClock()), source=src)
    assert w.check_available() is None
    assert w.poll() == []  # baseline
    assert w.poll() == []  # nothing changed
    src.data["postgresql.service"] = UnitState("loaded", "failed", "failed", "PostgreSQL")
    src.data["nginx.service"] = UnitState("loaded", "active", "running", "nginx")
    src.data["cron.service"] = UnitState("loaded", "activating", "start", "cron")  # transient
    events = {e.metadata.service: e for e in w.poll()}
    assert set(events) == {"postgresql.service", "nginx.service"}
    fail = events["postgresql.service"]
    assert (fail.category, fail.subcategory, fail.severity) == (
        "system.service", "fail", Severity.ERROR)
    assert "was active (running)" in fail.summary
    assert events["nginx.service"].subcategory == "start"
    src.data["nginx.service"] = UnitState("loaded", "inactive", "dead", "nginx")
    src.data["new-broken.service"] = UnitState("loaded", "failed", "failed", "x")
    src.data["new-ok.service"] = UnitState("loaded", "active", "running", "x")
    subs = sorted((e.metadata.service, e.subcategory) for e in w.poll())
    assert subs == [("new-broken.service", "fail"), ("nginx.service", "stop")]


def test_plain_parse() -> None:
    text = ("● foo.service loaded failed failed Foo daemon\n"
            "  bar.service loaded active running Bar\n")
    units = parse_plain_units(text)
    assert units["foo.service"].active == "failed"
    assert units["bar.service"].description == "Bar"


def test_no_systemd_is_unavailable(tmp_path) -> None:
    reason = systemd_unavailable_reason(str(tmp_path / "missing"))
    assert reason is not None


def _systemctl(tmp_path, monkeypatch, script: str) -> None:  # type: ignore[no-untyped-def]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"
    fake.write_text("#!/bin/sh\n" + script + "\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_a_systemd_the_bus_does_not_let_us_ask_is_unavailable(tmp_path, monkeypatch) -> None:
    """A container with the host's /run/systemd and D-Bus socket mounted asks over the bus as
    its own user: refused, the watcher is unavailable with the reason, not failing."""
    _systemctl(tmp_path, monkeypatch,
               'echo "Failed to connect to bus: Permission denied" >&2; exit 1')
    reason = systemd_unavailable_reason(str(tmp_path))
    assert reason == "systemctl cannot reach systemd: Failed to connect to bus: Permission denied"


def test_a_degraded_systemd_is_still_there(tmp_path, monkeypatch) -> None:
    _systemctl(tmp_path, monkeypatch, 'echo degraded; exit 1')  # one unit failed: exit 1
    assert systemd_unavailable_reason(str(tmp_path)) is None


class Timers:
    def __init__(self) -> None:
        self.data: dict[str, TimerState] = {}
        self.results: dict[str, str] = {}

    def timers(self) -> dict[str, TimerState]:
        return dict(self.data)

    def result(self, unit: str) -> str:
        return self.results.get(unit, "success")


def test_timer_runs_and_failures() -> None:
    src = Timers()
    src.data = {"logrotate.timer": TimerState("logrotate.timer", "logrotate.service", "100", "200")}
    w = TimersWatcher(EventContext(clock=FakeClock()), source=src)
    assert w.poll() == []
    assert w.poll() == []
    src.data["logrotate.timer"] = TimerState("logrotate.timer", "logrotate.service", "200", "300")
    src.data["backup.timer"] = TimerState("backup.timer", "backup.service", None, "400")
    events = sorted(w.poll(), key=lambda e: e.subcategory)
    assert [(e.category, e.subcategory) for e in events] == [("cron", "executed"),
                                                             ("cron", "scheduled")]
    src.data["backup.timer"] = TimerState("backup.timer", "backup.service", "400", "500")
    src.results["backup.service"] = "exit-code"
    (e,) = w.poll()
    assert e.subcategory == "failed" and e.severity == Severity.ERROR and "exit-code" in e.summary
