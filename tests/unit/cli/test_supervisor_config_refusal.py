"""A service that exits with EX_CONFIG (78) stops `totalrecall run` with its reason instead of
being restarted forever (e.g. the recall API on a public address without a token)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from totalrecall.supervisor import EX_CONFIG, ConfigRefused, Ports, Supervisor


def _exited(code: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", f"import sys; sys.exit({code})"])
    proc.wait(30)
    return proc


def test_config_refusal_stops_with_the_reason(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path, Ports(), services=["recall-api"])
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "recall-api.log").write_text(
        "recall-api: refusing to listen on 0.0.0.0 without TR_RECALL_API_TOKEN\n")
    sup.services[0].proc = _exited(EX_CONFIG)
    with pytest.raises(ConfigRefused, match=r"recall-api refused to start: .*TR_RECALL_API_TOKEN"):
        sup.supervise_once()


def test_a_crash_is_still_restarted(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path, Ports(), services=["recall-api"])
    sup.services[0].proc = _exited(1)
    sup.supervise_once()  # schedules the restart (backoff), raises nothing
    assert sup.services[0].next_start > 0
