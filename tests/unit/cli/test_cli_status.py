"""`totalrecall status`: NATS and Postgres are parts too; a stopped stack says how to start it."""

from __future__ import annotations

import socket

from totalrecall import status
from totalrecall.infra import free_port
from totalrecall.infra.ports import Ports


def _nothing_runs() -> Ports:
    return Ports(**{name: free_port() for name in Ports.__dataclass_fields__})


def test_a_stopped_stack_is_down_part_by_part_with_what_to_do() -> None:
    report = status.collect(_nothing_runs(), timeout=0.5)
    assert report["status"] == "down" and status.exit_code(report) == status.EXIT_DOWN
    assert list(report["parts"]) == ["nats", "postgres", "recall-api", "embedder", "indexer",
                                     "watchers"]
    assert all(p["status"] == "down" and p["reasons"] for p in report["parts"].values())
    assert "Start the stack with `totalrecall run`" in status.render(report)


def test_postgres_listening_is_ok() -> None:
    ports = _nothing_runs()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        ports.postgres = s.getsockname()[1]
        report = status.collect(ports, timeout=0.5)
    assert report["parts"]["postgres"] == {"status": "ok", "http": None, "reasons": [],
                                           "health": {"listening": True,
                                                      "port": ports.postgres}}
