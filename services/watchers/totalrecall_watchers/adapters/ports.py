"""The listening sockets and their processes (psutil.net_connections, psutil.Process)."""

from __future__ import annotations

import os
import socket

import psutil

from ..core.ports import Listener, Proc


def running_as_root() -> bool:
    """Root sees the owner of every socket; another user only its own processes'."""
    return os.geteuid() == 0


class PsutilPorts:
    def listeners(self, udp: bool) -> list[Listener]:
        out = []
        for c in psutil.net_connections(kind="inet"):
            if not c.laddr:
                continue
            if c.type == socket.SOCK_STREAM and c.status == psutil.CONN_LISTEN:
                proto = "tcp"
            elif udp and c.type == socket.SOCK_DGRAM and not c.raddr:
                proto = "udp"
            else:
                continue
            out.append(Listener(proto, c.laddr.port, c.laddr.ip.split("%")[0], c.pid))
        return out

    def process(self, pid: int) -> Proc | None:
        try:
            p = psutil.Process(pid)
            name = p.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None
        try:
            cmdline = p.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            cmdline = []
        return Proc(name, cmdline)
