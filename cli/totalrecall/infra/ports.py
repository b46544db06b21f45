from __future__ import annotations

import contextlib
import http.client
import os
import socket
import time
import urllib.request
from dataclasses import dataclass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports. Each is held until all are chosen: ports chosen one after
    another may repeat (a port is free again once its probe closes), and two services of one
    stack on one port fail in odd ways (a health probe reads nats-server's INFO line)."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """Does `url` answer 200? Not when nothing listens, and not when something that does not
    speak HTTP does (another program, or a port given twice: nats-server answers with its INFO
    line), rather than an exception that would stop whoever is waiting."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback
            return bool(r.status == 200)
    except (OSError, http.client.HTTPException):
        return False


def wait_for_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{host}:{port} did not open within {timeout:.0f}s") from None
            time.sleep(0.05)


@dataclass
class Ports:
    """The local stack's ports (`totalrecall run`, `status`, `doctor`): the defaults, or
    `TOTALRECALL_<NAME>_PORT`."""

    nats: int = 4222
    nats_monitor: int = 8222
    postgres: int = 5433
    api: int = 8765
    embedder: int = 8766
    indexer: int = 8767
    watchers: int = 8768
    prometheus: int = 9090

    @classmethod
    def from_env(cls) -> Ports:
        p = cls()
        for name in p.__dataclass_fields__:
            value = os.environ.get(f"TOTALRECALL_{name.upper()}_PORT")
            if value:
                setattr(p, name, int(value))
        return p
