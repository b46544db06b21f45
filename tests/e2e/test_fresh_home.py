"""`TOTALRECALL_HOME=/a/new/dir make run`: the stack finds the model (no silent keyword-only start).

Started as a user's `make run` starts it: a new, empty home and no TR_EMBEDDER_MODEL_PATH. The
model was built once (bootstrap) into the shared store or an earlier home; the new home must find
it, and the embedder must be ready with it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from totalrecall.launcher import launched_stack


def test_new_home_embeds_with_the_model(tmp_path: Path, model_path: Path) -> None:
    if not model_path.is_file():
        pytest.skip("the default model is not built")
    home = tmp_path / "new-home"
    with launched_stack(home, unset=("TR_EMBEDDER_MODEL_PATH",), ready_timeout=240) as stack:
        log = stack.log.read_text()
        assert "DEGRADED" not in log, log[-3000:]
        health = httpx.get(f"http://127.0.0.1:{stack.ports['embedder']}/health", timeout=5).json()
        assert health["status"] == "ok" and not health["fallback"], health
        assert health["model"] and health["model"].startswith("all-MiniLM-L6-v2"), health
        assert not (home / "models").exists()  # found, not copied
        status = subprocess.run(
            [str(Path(sys.executable).parent / "totalrecall"), "status", "--json"],
            env=stack.env, capture_output=True, text=True, timeout=60)
        report = json.loads(status.stdout)
        assert report["parts"]["embedder"]["status"] == "ok", report["parts"]["embedder"]


def test_a_degraded_start_is_loud(tmp_path: Path) -> None:
    """Without its model the embedder runs keyword-only: the console says so, and so does
    `totalrecall status` (exit code 1, the reason, --json)."""
    missing = tmp_path / "no-such-model.gguf"
    with launched_stack(tmp_path / "home", extra_env={"TR_EMBEDDER_MODEL_PATH": str(missing)},
                        ready_timeout=240) as stack:
        log = stack.log.read_text()
        assert "Total Recall is up but DEGRADED" in log, log[-3000:]
        assert "embedder: no embedding model" in log and str(missing) in log, log[-3000:]
        cli = str(Path(sys.executable).parent / "totalrecall")
        text = subprocess.run([cli, "status"], env=stack.env, capture_output=True, text=True,
                              timeout=60)
        assert text.returncode == 1 and "DEGRADED" in text.stdout, text.stdout
        report = json.loads(subprocess.run([cli, "status", "--json"], env=stack.env,
                                           capture_output=True, text=True, timeout=60).stdout)
        assert report["status"] == "degraded"
        assert report["parts"]["embedder"]["status"] == "degraded"
        assert any("no embedding model" in r for r in report["parts"]["embedder"]["reasons"])
        assert report["parts"]["indexer"]["status"] == "ok", report["parts"]["indexer"]
