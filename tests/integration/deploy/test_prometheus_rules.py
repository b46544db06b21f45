"""Prometheus configuration and alert rules pass `promtool` (Debian's prometheus package, which
`make bootstrap` installs): `check config`, `check rules`, and `test rules` (rules.test.yml feeds
synthetic series and expects exactly the alerts that should fire). promtool missing is a failure
unless TR_ALLOW_MISSING_PROMTOOL=1."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PROM = Path(__file__).resolve().parents[3] / "deploy" / "prometheus"


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if not found:
        if os.environ.get("TR_ALLOW_MISSING_PROMTOOL") == "1":
            pytest.skip("promtool missing and TR_ALLOW_MISSING_PROMTOOL=1")
        pytest.fail("promtool not installed: `make bootstrap` installs Debian's prometheus package "
                    "(apt-get install -y --no-install-recommends prometheus)")
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, cwd=PROM, timeout=120)


def test_rules_are_valid(promtool: str) -> None:
    r = _run(promtool, "check", "rules", "rules.yml")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout + r.stderr


def test_rules_fire_when_they_should(promtool: str) -> None:
    r = _run(promtool, "test", "rules", "rules.test.yml")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("config", ["prometheus.local.yml", "prometheus.compose.yml"])
def test_configs_are_valid(promtool: str, config: str) -> None:
    r = _run(promtool, "check", "config", config)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 1 rule files found" in r.stdout + r.stderr
