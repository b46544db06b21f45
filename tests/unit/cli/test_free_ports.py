"""`free_ports`: a stack's ports are chosen together, so no two of its services share one."""

from __future__ import annotations

import socket

from totalrecall.infra import free_ports


def test_free_ports_are_distinct_and_bindable() -> None:
    for _ in range(50):  # ports chosen one after another could repeat; these never do
        ports = free_ports(7)
        assert len(set(ports)) == 7
    for port in free_ports(3):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # released once chosen
