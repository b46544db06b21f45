"""The network interfaces (psutil) and a DNS lookup with a deadline (getaddrinfo on a thread)."""

from __future__ import annotations

import socket
import threading

import psutil

from ..core.network import Iface


class PsutilNetwork:
    def interfaces(self) -> dict[str, Iface]:
        stats = psutil.net_if_stats()
        addrs = psutil.net_if_addrs()
        out: dict[str, Iface] = {}
        for name in set(stats) | set(addrs):
            st = stats.get(name)
            ips = frozenset(a.address.split("%")[0] for a in addrs.get(name, [])
                            if a.family in (socket.AF_INET, socket.AF_INET6))
            out[name] = Iface(bool(st and st.isup), ips, st.speed if st else 0,
                              st.mtu if st else 0)
        return out

    def resolve(self, host: str, timeout: float) -> str | None:
        result: list[str | None] = ["timed out"]

        def work() -> None:
            try:
                socket.getaddrinfo(host, None)
                result[0] = None
            except OSError as exc:
                result[0] = str(exc)

        t = threading.Thread(target=work, daemon=True)
        t.start()
        t.join(timeout)
        return result[0]
