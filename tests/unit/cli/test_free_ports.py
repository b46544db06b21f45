"""`free_ports`: a stack's ports are chosen together, so no two of its services share one."""

from __future__ import annotations

import socket

from totalrecall.infra import free_ports


def test_free_ports_are_distinct_and_bindable() -> None:
    # 500 ports chosen one after another (bind to port 0, close, again) repeat nearly always
    # (the kernel hands out a released port again); chosen together they never do.
    ports = free_ports(500)
    assert len(set(ports)) == 500
    for port in free_ports(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # released once chosen
