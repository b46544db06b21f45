"""`totalrecall doctor`: every check finds a real problem and says how to fix it."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cli_fake_api import run_cli
from totalrecall.commands.doctor import checks as doctor
from totalrecall.infra.ports import Ports


@pytest.fixture
def listener() -> Iterator[int]:
    """A port something else (this test) listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_port_held_by_another_program_fails_with_a_free_one_to_use(listener: int) -> None:
    checks = {c.name: c for c in doctor.check_ports(Ports(api=listener))}
    api = checks["port api"]
    assert api.status == doctor.FAIL and f"{listener} in use by" in api.detail
    assert api.fix and api.fix.startswith("stop it, or use another port: export "
                                          "TOTALRECALL_API_PORT=")
    assert "port prometheus" not in checks
    held_by_us = doctor.check_ports(Ports(api=listener),
                                    owner=lambda _p: "/venv/bin/python -m totalrecall_recall_api")
    assert {c.name: c.status for c in held_by_us}["port api"] == doctor.OK


def test_a_port_owner_named_by_a_child_that_exited_is_read_again(
        listener: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Postgres forks a backend per connection, and the fork holds the listening socket for a
    moment: the socket table can name that child, gone by the time it is read."""
    import os

    import psutil

    real = psutil.net_connections(kind="tcp")
    ours = next(c for c in real if c.laddr and c.laddr.port == listener)
    gone = 2**22 + 17  # above any pid_max: no such process
    tables = iter([[ours._replace(pid=gone)], [ours._replace(pid=os.getpid())]])
    monkeypatch.setattr(psutil, "net_connections", lambda kind="tcp": next(tables))
    owner = doctor._owner(listener)
    assert owner is not None and owner.endswith(f"(pid {os.getpid()})")


def test_a_free_port_is_ok() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])  # bound, not listening: nothing answers
    checks = {c.name: c for c in doctor.check_ports(Ports(nats=port))}
    assert checks["port nats"].status == doctor.OK and checks["port nats"].detail == f"{port} free"


def test_the_model_missing_garbage_or_unloadable(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TR_EMBEDDER_MODEL_PATH", raising=False)
    missing = doctor.check_model(tmp_path / "m.gguf")
    assert missing.status == doctor.FAIL and missing.fix == "totalrecall model build"
    (tmp_path / "m.gguf").write_bytes(b"PK\x03\x04 a zip, not a model")
    garbage = doctor.check_model(tmp_path / "m.gguf")
    assert garbage.status == doctor.FAIL and "not a GGUF file" in garbage.detail
    assert garbage.fix == f"rm {tmp_path / 'm.gguf'} && totalrecall model build"
    (tmp_path / "m.gguf").write_bytes(b"GGUF" + b"\x00" * 64)  # the magic, nothing behind it
    assert doctor.check_model(tmp_path / "m.gguf", load=False).status == doctor.OK
    broken = doctor.check_model(tmp_path / "m.gguf")  # llama.cpp really tries to load it
    assert broken.status == doctor.FAIL and "llama.cpp cannot load it" in broken.detail
    monkeypatch.setenv("TR_EMBEDDER_MODEL_PATH", str(tmp_path / "other.gguf"))
    chosen = doctor.check_model()
    assert chosen.status == doctor.FAIL and str(tmp_path / "other.gguf") in chosen.detail
    assert chosen.fix and "TR_EMBEDDER_MODEL_PATH" in chosen.fix


def test_missing_packages_name_the_install_command() -> None:
    def find(module: str) -> Any:
        return None if module in ("zvec", "totalrecall_indexer", "tqdm") else object()

    c = doctor.check_packages(find)
    assert c.status == doctor.FAIL
    assert c.detail == "missing: services/indexer, zvec, tqdm"
    assert c.fix and "bootstrap" in c.fix and "-m pip install zvec tqdm" in c.fix


def test_disk_space_and_an_unwritable_home(tmp_path: Path) -> None:
    def usage(free: float) -> Any:
        return lambda _p: SimpleNamespace(free=int(free * doctor.GIB))

    home = tmp_path / "not-yet" / "home"
    ok = {c.name: c for c in doctor.check_home(home, usage(50))}
    assert ok["state directory"].status == doctor.OK and "will be created" in \
        ok["state directory"].detail
    assert ok["disk space"].status == doctor.OK
    low = {c.name: c for c in doctor.check_home(home, usage(3))}
    assert low["disk space"].status == doctor.WARN
    full = {c.name: c for c in doctor.check_home(home, usage(0.2))}
    assert full["disk space"].status == doctor.FAIL
    assert full["disk space"].fix and "TOTALRECALL_HOME=" in full["disk space"].fix


def test_the_running_stack_is_reported_not_required() -> None:
    down = {"status": "down", "parts": {"recall-api": {"status": "down", "http": None,
                                                       "reasons": ["not reachable"]}}}
    assert doctor.check_stack(lambda: down).detail.startswith("not running")
    degraded = {"status": "degraded", "parts": {
        "recall-api": {"status": "ok", "http": 200, "reasons": []},
        "embedder": {"status": "degraded", "http": 200, "reasons": ["no embedding model"]}}}
    c = doctor.check_stack(lambda: degraded)
    assert c.status == doctor.WARN and "embedder: no embedding model" in c.detail


def _with_indexer(health: dict[str, Any]) -> dict[str, Any]:
    return {"status": "ok", "parts": {"indexer": {"status": health.get("status", "ok"),
                                                  "http": 200, "reasons": [],
                                                  "health": health}}}


def test_the_vector_index_check_reports_the_indexers_consistency_check() -> None:
    assert doctor.check_index({"parts": {}}).detail.startswith("not checked")
    tiers = {"hot": {"zvec": 10, "postgres": 10}, "warm": {"zvec": 3, "postgres": 3}}
    ok = doctor.check_index(_with_indexer({"consistency": {
        "outcome": "consistent", "tiers": tiers, "checked_at": "2026-11-29T04:00:00+00:00"}}))
    assert ok.status == doctor.OK and "hot 10/10, warm 3/3" in ok.detail
    assert "2026-11-29T04:00:00" in ok.detail
    fixing = doctor.check_index(_with_indexer({
        "status": "degraded", "reindex": {"warm": {"reason": "7 of its memories were missing"}},
        "consistency": {"outcome": "repaired", "missing": {"warm": 7}, "tiers": tiers}}))
    assert fixing.status == doctor.WARN and "warm" in fixing.detail and "missing" in fixing.detail
    done = doctor.check_index(_with_indexer({"consistency": {
        "outcome": "repaired", "missing": {"warm": 7}, "removed": {"duplicate": {"cold": 1}},
        "tiers": tiers}}))
    assert done.status == doctor.OK and "{'warm': 7}" in done.detail and "cold" in done.detail
    waiting = doctor.check_index(_with_indexer({"consistency": {
        "outcome": "skipped", "why": "12 events are still in the pipeline"}}))
    assert waiting.status == doctor.WARN and "12 events" in waiting.detail


def test_doctor_prints_each_fix_and_fails_with_exit_1(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    checks = [doctor.Check("nats-server", doctor.OK, "/bin/nats-server"),
              doctor.Check("embedding model", doctor.FAIL, "missing", "totalrecall model build"),
              doctor.Check("disk space", doctor.WARN, "3 GiB", "free space")]
    monkeypatch.setattr(doctor, "run_checks", lambda load_model=True: checks)
    code, out, _ = run_cli(capsys, "doctor")
    assert code == 1
    assert "  FAIL  embedding model   missing\n        fix: totalrecall model build" in out
    assert "  warn  disk space" in out and "fix: free space" in out
    code, out, _ = run_cli(capsys, "doctor", "--json")
    rep = json.loads(out)
    assert code == 1 and rep["status"] == "fail" and rep["checks"][1]["fix"] == \
        "totalrecall model build"
    monkeypatch.setattr(doctor, "run_checks", lambda load_model=True: checks[::2])
    assert run_cli(capsys, "doctor", "--quick")[0] == 0  # warnings do not fail it
