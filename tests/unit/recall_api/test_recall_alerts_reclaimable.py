"""Reclaimable-space advice: the watcher's real reports (on a tree of the test's own) turned
into the `reclaimable_space` alert, with the commands, a warning while a disk fills."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from alert_events import storage_reports
from test_recall_alerts import row, rows
from totalrecall_recall_api.core.alerts import Thresholds, detect, reclaimable_space
from totalrecall_watchers.adapters.reclaimable import ReclaimableWatcher
from totalrecall_watchers.core.base import EventContext, FakeClock
from totalrecall_watchers.settings import ReclaimableSettings

MiB = 2**20
T0 = datetime(2026, 10, 1, 3, 0, tzinfo=UTC)
RULES = Thresholds(reclaimable_bytes=8 * MiB)


def _file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def _watcher(root: Path) -> ReclaimableWatcher:
    return ReclaimableWatcher(EventContext(hostname="ws", clock=FakeClock(wall=T0)),
                              ReclaimableSettings(root=str(root), min_total_bytes=MiB))


def test_enough_to_free_is_advice_with_the_commands(tmp_path: Path) -> None:
    _file(tmp_path / "var/log/journal/j", 6 * MiB)
    _file(tmp_path / "root/.cache/pip/p", 3 * MiB)
    [ev] = _watcher(tmp_path).poll()
    [alert] = reclaimable_space([row(ev)], [], RULES)
    assert alert.rule == "reclaimable_space" and alert.state == "open"
    assert alert.severity == "info" and alert.subject == "ws"
    assert "could be freed" in alert.text and "Advice only: nothing is deleted" in alert.text
    assert "systemd journal" in alert.text and "`journalctl --vacuum-time=2weeks`" in alert.text
    assert "`pip cache purge`" in alert.text
    assert (tmp_path / "var/log/journal/j").exists()  # advice: nothing was touched


def test_a_filling_disk_makes_it_a_warning(tmp_path: Path) -> None:
    _file(tmp_path / "var/cache/apt/archives/a.deb", 9 * MiB)
    [ev] = _watcher(tmp_path).poll()
    disk = rows(storage_reports("/", [(T0 - timedelta(hours=2), 93.0)]))
    alerts = detect([*disk, row(ev)], [], {}, T0, RULES)
    advice = next(a for a in alerts if a.rule == "reclaimable_space")
    assert advice.severity == "warning" and "/ is filling" in advice.text


def test_little_to_free_is_no_alert_and_a_drop_resolves_it(tmp_path: Path) -> None:
    w = _watcher(tmp_path)
    _file(tmp_path / "var/log/journal/j", 2 * MiB)
    [small] = w.poll()
    assert reclaimable_space([row(small)], [], RULES) == []
    _file(tmp_path / "var/log/journal/k", 9 * MiB)
    [big] = w.poll()
    (tmp_path / "var/log/journal/k").unlink()
    (tmp_path / "var/log/journal/j").unlink()
    w.ctx.clock.advance(3600)  # type: ignore[attr-defined]
    [gone] = w.poll()
    [alert] = reclaimable_space([row(small), row(big), row(gone)], [], RULES)
    assert alert.state == "resolved" and alert.resolved_at == gone.timestamp


def test_switched_off() -> None:
    assert reclaimable_space([], [], Thresholds(reclaimable_bytes=0)) == []
