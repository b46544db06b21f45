"""The supervisor restarts nats-server whose JetStream store failed on a full disk, once there is
room again (the disk-full chaos row: nats-server 2.15 keeps the write error otherwise)."""

from __future__ import annotations

from pathlib import Path

from totalrecall.infra.nats_store_watch import NatsStoreWatch

FAILED = ("[1] 2026/11/25 11:01:38.404370 [ERR] JetStream failed to store a msg on stream "
          "'$G > MEMORY_EVENTS': write /h/nats/jetstream/$G/streams/MEMORY_EVENTS/msgs/1.blk: "
          "no space left on device\n")
OTHER = "[1] 2026/11/25 11:01:30.000000 [INF] Server is ready\n"


def _watch(tmp_path: Path, min_free: int) -> tuple[NatsStoreWatch, Path]:
    log = tmp_path / "nats-server.log"
    log.write_text(OTHER)
    w = NatsStoreWatch(log, tmp_path / "nats", min_free=min_free)
    w.skip_existing()
    return w, log


def _append(log: Path, text: str) -> None:
    with open(log, "a") as f:
        f.write(text)


def test_no_failure_no_restart(tmp_path: Path) -> None:
    w, log = _watch(tmp_path, min_free=0)
    _append(log, OTHER)
    assert w.restart_reason() is None


def test_a_store_failure_restarts_once_there_is_room(tmp_path: Path) -> None:
    w, log = _watch(tmp_path, min_free=1 << 62)  # the disk is still full
    _append(log, FAILED)
    assert w.restart_reason() is None
    assert w.restart_reason() is None  # remembered while waiting for room
    w.min_free = 0  # room again
    reason = w.restart_reason()
    assert reason is not None and "full disk" in reason
    assert w.restart_reason() is None  # one restart per failure


def test_failures_logged_before_start_do_not_count(tmp_path: Path) -> None:
    log = tmp_path / "nats-server.log"
    log.write_text(FAILED)
    w = NatsStoreWatch(log, tmp_path, min_free=0)
    w.skip_existing()
    assert w.restart_reason() is None


def test_a_partial_line_is_read_when_complete(tmp_path: Path) -> None:
    w, log = _watch(tmp_path, min_free=0)
    _append(log, FAILED[:40])
    assert w.restart_reason() is None
    _append(log, FAILED[40:])
    assert w.restart_reason() is not None
