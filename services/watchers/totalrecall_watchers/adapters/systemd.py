"""systemd through `systemctl`: the service units, the timers and a unit's last result; whether
systemd is PID 1 at all."""

from __future__ import annotations

import os
import shutil
import subprocess

from ..core.systemd import (
    TimerState,
    UnitState,
    parse_plain_units,
    timers_from_json,
    units_from_json,
)

SYSTEMD_RUNTIME = "/run/systemd/system"


def systemd_unavailable_reason(runtime_dir: str = SYSTEMD_RUNTIME) -> str | None:
    if shutil.which("systemctl") is None:
        return "systemctl not found on PATH"
    if not os.path.isdir(runtime_dir):
        return f"systemd is not the init system (no {runtime_dir}); PID 1 is " + _pid1()
    return _unreachable()


def _unreachable() -> str | None:
    """Why systemctl cannot ask systemd, or None. A container given the host's /run/systemd
    and D-Bus socket asks over the bus as its own user: a bus that refuses it is a source
    that is not there (looked for again later), not a watcher that fails every minute.
    `is-system-running` prints the state (exit 1 for "degraded" too) whenever it reached
    systemd, and nothing when it did not."""
    try:
        r = subprocess.run(["systemctl", "is-system-running"], capture_output=True, text=True,
                           timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"systemctl cannot reach systemd: {exc}"
    if r.stdout.strip():
        return None
    why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[0]
    return f"systemctl cannot reach systemd: {why[:200]}"


def _pid1() -> str:
    try:
        with open("/proc/1/comm") as f:
            return f.read().strip() or "?"
    except OSError:
        return "?"


def _systemctl(*args: str, timeout: float = 20.0) -> str:
    r = subprocess.run(["systemctl", *args, "--no-pager"], capture_output=True, text=True,
                       timeout=timeout, check=False)
    if r.returncode != 0 and not r.stdout.strip():
        raise RuntimeError(f"systemctl {' '.join(args)} exited {r.returncode}: {r.stderr[:300]}")
    return r.stdout


class SystemctlUnits:
    def units(self) -> dict[str, UnitState]:
        out = _systemctl("list-units", "--type=service", "--all", "--output=json")
        try:
            return units_from_json(out)
        except (ValueError, KeyError, TypeError):
            return parse_plain_units(_systemctl("list-units", "--type=service", "--all",
                                                "--plain", "--no-legend"))


class SystemctlTimers:
    def timers(self) -> dict[str, TimerState]:
        return timers_from_json(_systemctl("list-timers", "--all", "--output=json"))

    def result(self, unit: str) -> str:
        try:
            return _systemctl("show", "-p", "Result", "--value", unit).strip() or "unknown"
        except (RuntimeError, subprocess.TimeoutExpired):
            return "unknown"
