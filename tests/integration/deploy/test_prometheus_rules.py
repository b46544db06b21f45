"""Prometheus configuration and alert rules pass `promtool` (Debian's prometheus package)."""

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
        pytest.fail("promtool not installed: `make bootstrap` installs Debian's prometheus package")
    return found


def test_rules_are_valid(promtool: str) -> None:
    r = subprocess.run([promtool, "check", "rules", str(PROM / "rules.yml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 10 rules found" in r.stdout + r.stderr


@pytest.mark.parametrize("config", ["prometheus.local.yml", "prometheus.compose.yml"])
def test_configs_are_valid(promtool: str, config: str, tmp_path: Path) -> None:
    # The compose config names the rules by their in-container path: check a copy beside them.
    text = (PROM / config).read_text().replace("/etc/prometheus/rules.yml", "rules.yml")
    (tmp_path / config).write_text(text)
    shutil.copy(PROM / "rules.yml", tmp_path / "rules.yml")
    r = subprocess.run([promtool, "check", "config", str(tmp_path / config)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
