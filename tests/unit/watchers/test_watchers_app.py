"""The app with fake watchers and a recording publisher: /health states, /metrics, settings."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from totalrecall_schema import MemoryEvent
from totalrecall_watchers.adapters.publisher import RecordingPublisher
from totalrecall_watchers.app import create_app
from totalrecall_watchers.core.base import EventContext, FakeClock, Unavailable, Watcher
from totalrecall_watchers.settings import Settings
from waiting import wait_for_sync


class Ticker(Watcher):
    name = "ticker"
    interval_s = 0.01

    def poll(self) -> list[MemoryEvent]:
        return [self.ctx.event(self.name, "system.process", "spawn", "tick")]


class Missing(Watcher):
    name = "missing"

    def check_available(self) -> str | None:
        return "no such source here"


class Broken(Watcher):
    name = "broken"
    interval_s = 0.01

    def poll(self) -> list[MemoryEvent]:
        raise OSError("permission denied reading /proc/x")


class GoesAway(Watcher):
    name = "goesaway"
    interval_s = 0.01

    def poll(self) -> list[MemoryEvent]:
        raise Unavailable("source vanished")


class CheckExplodes(Watcher):
    name = "explodes"

    def check_available(self) -> str | None:
        raise RuntimeError("bad")


def wait(pred, timeout: float = 5.0) -> None:
    wait_for_sync(pred, timeout=timeout, interval=0.02, what="the watchers' state")


def test_health_lists_every_watcher_state_and_rate_limit_applies() -> None:
    settings = Settings()
    settings.rate_limit.per_watcher_burst = 5
    pub = RecordingPublisher()
    ctx = EventContext(clock=FakeClock())  # frozen clock: no refill
    watchers = [Ticker(ctx), Missing(ctx), Broken(ctx), GoesAway(ctx), CheckExplodes(ctx)]
    app = create_app(settings, publisher=pub, clock=ctx.clock, watchers=watchers)
    with TestClient(app) as client:
        wait(lambda: app.state.runner.status["broken"].errors >= 1
             and app.state.limiter.suppressed[("ticker", "watcher")] >= 3)
        r = client.get("/health")
        assert r.status_code == 200
        h = r.json()
        w = h["watchers"]
        assert w["ticker"]["state"] == "running"
        assert w["missing"] == {"state": "unavailable", "reason": "no such source here",
                                "events": 0, "interval_s": 60.0}
        assert w["broken"]["state"] == "failed" and "permission denied" in w["broken"]["reason"]
        assert w["goesaway"]["state"] == "unavailable"
        assert w["explodes"]["state"] == "unavailable" and "bad" in w["explodes"]["reason"]
        assert h["status"] == "degraded"  # a watcher failed
        assert len(pub.events) == 5  # the burst; the rest suppressed
        assert h["rate_limit"]["suppressed"]["ticker"]["watcher"] >= 3
        m = client.get("/metrics").text
        assert 'totalrecall_watchers_events_suppressed_total{reason="rate_limit_watcher",' \
               'watcher="ticker"}' in m
        assert 'totalrecall_watchers_watcher_state{state="failed",watcher="broken"} 1.0' in m
    assert pub.started is False


def test_default_watchers_build_and_disabled_ones_show(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TR_WATCHERS_JOURNAL__ENABLED", "false")
    monkeypatch.setenv("TR_WATCHERS_PROCESS__INTERVAL_S", "1")
    monkeypatch.setenv("TR_WATCHERS_PROCESS__CPU_PERCENT", "40")
    monkeypatch.setenv("TR_WATCHERS_FILESYSTEM__PATHS", '["/nonexistent/a", "/nonexistent/b"]')
    monkeypatch.setenv("TR_WATCHERS_PG_DSN", "postgresql://ignored")  # the supervisor sets it
    settings = Settings()
    assert settings.process.interval_s == 1 and settings.process.cpu_percent == 40
    assert settings.filesystem.paths == ["/nonexistent/a", "/nonexistent/b"]
    assert settings.topology.events_subject("file") == "memory.events.file"
    pub = RecordingPublisher()
    app = create_app(settings, publisher=pub)
    with TestClient(app) as client:
        wait(lambda: all(s.state != "starting" for s in app.state.runner.status.values()))
        w = client.get("/health").json()["watchers"]
    assert w["journal"]["state"] == "disabled"
    assert w["process"]["state"] == "running"
    assert w["filesystem"]["state"] == "unavailable"
    assert set(w) == {"process", "journal", "services", "storage", "filesystem", "network",
                      "nixos", "packages", "sessions", "timers", "hardware", "pressure",
                      "reclaimable", "containers", "security", "ports", "firewall"}
