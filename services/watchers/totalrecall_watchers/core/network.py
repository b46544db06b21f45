"""Network watcher: interfaces coming up/down/appearing, address changes, optional DNS check
(the interfaces and the lookup are `adapters/network.py`'s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from totalrecall_schema import MemoryEvent, Severity

from .base import EventContext, Watcher

if TYPE_CHECKING:
    from ..settings import NetworkSettings


@dataclass(frozen=True)
class Iface:
    up: bool
    addresses: frozenset[str]
    speed: int = 0
    mtu: int = 0


class NetworkSource(Protocol):
    def interfaces(self) -> dict[str, Iface]: ...

    def resolve(self, host: str, timeout: float) -> str | None:
        """None on success, else the error."""
        ...


class NetworkWatcher(Watcher):
    name = "network"

    def __init__(self, ctx: EventContext, settings: NetworkSettings,
                 source: NetworkSource) -> None:
        super().__init__(ctx)
        self.settings = settings
        self.interval_s = settings.interval_s
        self.source = source
        self.prev: dict[str, Iface] | None = None
        self.dns_ok: bool | None = None

    def poll(self) -> list[MemoryEvent]:
        ifaces = {k: v for k, v in self.source.interfaces().items() if k != "lo"}
        events: list[MemoryEvent] = []
        if self.prev is not None:
            for name, new in sorted(ifaces.items()):
                old = self.prev.get(name)
                if old is None:
                    state = "up" if new.up else "down"
                    events.append(self._ev("connect" if new.up else "address_change", name,
                                           f"interface {name} appeared ({state}, "
                                           f"{self._addrs(new.addresses)})", new))
                    continue
                if old.up != new.up:
                    events.append(self._ev("connect" if new.up else "disconnect", name,
                                           f"interface {name} is {'up' if new.up else 'down'}",
                                           new, Severity.INFO if new.up else Severity.WARNING))
                if old.addresses != new.addresses:
                    added, removed = new.addresses - old.addresses, old.addresses - new.addresses
                    parts = []
                    if added:
                        parts.append("added " + self._addrs(added))
                    if removed:
                        parts.append("removed " + self._addrs(removed))
                    events.append(self._ev("address_change", name,
                                           f"{name} addresses changed: {'; '.join(parts)}", new))
            for name in sorted(set(self.prev) - set(ifaces)):
                events.append(self._ev("disconnect", name, f"interface {name} disappeared",
                                       self.prev[name], Severity.WARNING))
        self.prev = ifaces
        if self.settings.dns_check:
            events.extend(self._dns())
        return events

    @staticmethod
    def _addrs(addrs: frozenset[str]) -> str:
        return ", ".join(sorted(addrs)) or "no addresses"

    def _ev(self, sub: str, name: str, summary: str, iface: Iface,
            sev: Severity = Severity.INFO) -> MemoryEvent:
        detail = (f"interface: {name}\nstate: {'up' if iface.up else 'down'}\n"
                  f"addresses: {self._addrs(iface.addresses)}\nspeed: {iface.speed} Mb/s\n"
                  f"mtu: {iface.mtu}")
        return self.ctx.event(self.name, "system.network", sub, summary, detail=detail,
                              severity=sev, tags=["network", name], interface=name)

    def _dns(self) -> list[MemoryEvent]:
        host = self.settings.dns_host
        err = self.source.resolve(host, self.settings.dns_timeout_s)
        ok = err is None
        prev, self.dns_ok = self.dns_ok, ok
        if ok == prev or (ok and prev is None):
            return []
        if ok:
            return [self.ctx.event(self.name, "system.network", "connect",
                                   f"DNS resolution of {host} works again",
                                   tags=["network", "dns"], host_checked=host)]
        return [self.ctx.event(self.name, "system.network", "dns_fail",
                               f"DNS resolution of {host} failed: {err}",
                               detail=f"host: {host}\nerror: {err}", severity=Severity.ERROR,
                               tags=["network", "dns"], host_checked=host)]
