"""Ports watcher: a port that starts listening, and one that stops (psutil.net_connections).

Every interval the listening sockets (TCP `LISTEN`; bound UDP sockets with `udp`) are read and
grouped by protocol and port: a port that was not listening at the previous poll is
`system.network/listen`, one that is gone `system.network/unlisten`; a port that starts to
listen on more addresses (from 127.0.0.1 to 0.0.0.0 as well) is a `listen` again. The first
poll is the silent baseline. The process is the socket's owner (psutil gives its PID only for
processes this user may inspect: run as root to see every one), with its command line scrubbed.
The sockets are listed by `adapters/ports.py`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Unavailable, Watcher
from .scrub import scrub_cmdline

if TYPE_CHECKING:
    from ..settings import PortsSettings


@dataclass(frozen=True)
class Listener:
    proto: str  # "tcp" or "udp"
    port: int
    address: str
    pid: int | None


@dataclass(frozen=True)
class Proc:
    name: str
    cmdline: list[str]


class PortSource(Protocol):
    def listeners(self, udp: bool) -> list[Listener]: ...

    def process(self, pid: int) -> Proc | None: ...


def _loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


@dataclass
class _Port:
    addresses: frozenset[str]
    pids: tuple[int, ...]
    process: str | None = None
    cmdline: str | None = None


class PortsWatcher(Watcher):
    name = "ports"

    def __init__(self, ctx: EventContext, settings: PortsSettings,
                 source: PortSource, *, as_root: bool = True) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.source = source
        #: Whether this process sees every socket's owner (root does; another user sees the
        #: PIDs of its own processes only).
        self.as_root = as_root
        self.prev: dict[tuple[str, int], _Port] | None = None
        self.unknown_owner = 0

    def check_available(self) -> str | None:
        try:
            found = self.source.listeners(self.settings.udp)
        except Exception as exc:  # psutil.AccessDenied (macOS without root), no /proc
            return f"cannot list the listening sockets: {exc!r}"
        if not self.as_root:
            self.note = ("not root: the process of another user's socket is unknown "
                         f"({sum(1 for x in found if x.pid is None)} such now)")
        return None

    def stats(self) -> dict[str, int]:
        return {"listening_ports": len(self.prev or {}), "unknown_owner": self.unknown_owner}

    def _read(self) -> dict[tuple[str, int], _Port]:
        try:
            found = self.source.listeners(self.settings.udp)
        except PermissionError as exc:
            raise Unavailable(f"cannot list the listening sockets: {exc}") from exc
        ignore = set(self.settings.ignore_ports)
        addrs: dict[tuple[str, int], set[str]] = {}
        pids: dict[tuple[str, int], set[int]] = {}
        for x in found:
            if x.port in ignore:
                continue
            key = (x.proto, x.port)
            addrs.setdefault(key, set()).add(x.address)
            pids.setdefault(key, set())
            if x.pid:
                pids[key].add(x.pid)
        return {k: _Port(frozenset(v), tuple(sorted(pids[k]))) for k, v in addrs.items()}

    def _owner(self, port: _Port) -> None:
        """Name the port's process (the lowest PID: a prefork server's parent)."""
        for pid in port.pids:
            proc = self.source.process(pid)
            if proc is not None:
                port.process = proc.name
                port.cmdline = scrub_cmdline(proc.cmdline, self.settings.max_cmdline_chars) \
                    if proc.cmdline else None
                return
        self.unknown_owner += 1

    def poll(self) -> list[MemoryEvent]:
        now = self._read()
        prev, self.prev = self.prev, now
        if prev is None:
            for port in now.values():
                self._owner(port)
            return []
        events: list[MemoryEvent] = []
        for key in sorted(now):
            new, old = now[key], prev.get(key)
            if old is not None:
                new.process, new.cmdline = old.process, old.cmdline
                if new.pids and new.pids != old.pids:
                    self._owner(new)
                if not new.addresses - old.addresses:
                    continue
            else:
                self._owner(new)
            events.append(self._event("listen", key, new, old))
        for key in sorted(set(prev) - set(now)):
            events.append(self._event("unlisten", key, prev[key], None))
        return events

    def _event(self, sub: str, key: tuple[str, int], port: _Port,
               old: _Port | None) -> MemoryEvent:
        proto, number = key
        addresses = sorted(port.addresses)
        exposed = any(not _loopback(a) for a in addresses)
        where = ", ".join(addresses)
        scope = "exposed beyond this machine" if exposed else "loopback only"
        pid = port.pids[0] if port.pids else None
        if port.process:
            owner = f"{port.process} (PID {pid})" + (f": {port.cmdline}" if port.cmdline else "")
        elif pid:
            owner = f"PID {pid} (its process is gone)"
        else:
            owner = "an unknown process (not permitted to see it)"
        if sub == "listen" and old is not None:
            added = ", ".join(sorted(port.addresses - old.addresses))
            summary = (f"Port {number}/{proto} now listens on {added} as well ({where}: {scope}) "
                       f"— {owner}")
        elif sub == "listen":
            summary = f"Port {number}/{proto} now listening on {where} ({scope}) — {owner}"
        else:
            was = f"{port.process} (PID {pid})" if port.process else (
                f"PID {pid}" if pid else "an unknown process")
            summary = f"Port {number}/{proto} no longer listening (was {was}, on {where})"
        detail = "\n".join(x for x in (
            f"port: {number}/{proto}", f"addresses: {where}", f"scope: {scope}",
            f"process: {port.process}" if port.process else "",
            f"pids: {', '.join(map(str, port.pids))}" if port.pids else "",
            f"command line: {port.cmdline}" if port.cmdline else "") if x)
        severity = Severity.WARNING if sub == "listen" and exposed else Severity.INFO
        extra: dict[str, Any] = {"port": number, "protocol": proto, "addresses": addresses,
                                    "exposed": exposed}
        if pid:
            extra["pid"] = pid
        if port.process:
            extra["process"] = port.process
        if port.cmdline:
            extra["cmdline"] = port.cmdline
        return self.ctx.event(self.name, "system.network", sub, summary, detail=detail,
                              severity=severity,
                              tags=["network", "port", sub, *(["exposed"] if exposed else [])],
                              **extra)
