"""One container: the watchers' object graph, built from the settings. Nothing is started or
connected here (the app's lifespan starts the publisher and `lifecycle.WatcherRunner`).

This is also where each watcher is wired to its source: the adapters that read the host
(`adapters/`) are handed to the watchers that decide what is news (`core/`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from totalrecall_schema.host import local_host

from .adapters.publisher import NatsPublisher, Publisher
from .core.base import Clock, EventContext, SystemClock, Watcher
from .core.ratelimit import RateLimiter
from .handlers import EventHandler
from .lifecycle import WatcherRunner
from .metrics import Metrics
from .settings import Settings

WATCHER_NAMES = ("process", "journal", "services", "storage", "filesystem", "network", "nixos",
                 "packages", "sessions", "timers", "hardware", "pressure", "reclaimable",
                 "containers", "security", "ports", "firewall")


@dataclass
class Container:
    settings: Settings
    metrics: Metrics
    publisher: Publisher
    limiter: RateLimiter
    runner: WatcherRunner


def build_watchers(settings: Settings, ctx: EventContext) -> tuple[list[Watcher], list[str]]:
    """The enabled watchers (in priority order) and the names of the disabled ones, each handed
    its source (an adapter). Imported here, not at the top: importing the app (tests that give
    their own watchers) loads no watcher, psutil or fanotify code."""
    from .adapters.containers_watcher import ContainersWatcher
    from .adapters.filesystem import FilesystemWatcher
    from .adapters.firewall import FirewallWatcher
    from .adapters.hardware import SystemHardware
    from .adapters.journal import JournalWatcher
    from .adapters.network import PsutilNetwork
    from .adapters.nixos import NixosWatcher
    from .adapters.packages import PackagesWatcher
    from .adapters.ports import PsutilPorts, running_as_root
    from .adapters.pressure import SystemPressure, page_size
    from .adapters.proc_connector import ProcConnectorExits
    from .adapters.process_table import PsutilProcessSource
    from .adapters.reclaimable import ReclaimableWatcher
    from .adapters.security import SecurityWatcher
    from .adapters.sessions import psutil_sessions
    from .adapters.storage import PsutilStorage
    from .adapters.systemd import SystemctlTimers, SystemctlUnits, systemd_unavailable_reason
    from .core.hardware import HardwareWatcher
    from .core.network import NetworkWatcher
    from .core.ports import PortsWatcher
    from .core.pressure import PressureWatcher
    from .core.process import ProcessThresholds, ProcessWatcher
    from .core.sessions import SessionsWatcher
    from .core.storage import StorageWatcher
    from .core.systemd import ServicesWatcher, TimersWatcher

    s = settings
    # The journal watcher leaves the auth lines the security watcher reports (while it runs).
    security = SecurityWatcher(ctx, s.security) if s.security.enabled else None
    factories: dict[str, Any] = {
        "process": lambda: ProcessWatcher(ctx, interval_s=s.process.interval_s,
                                          thresholds=ProcessThresholds(
                                              cpu_percent=s.process.cpu_percent,
                                              rss_mb=s.process.rss_mb,
                                              mem_percent=s.process.mem_percent,
                                              rearm_factor=s.process.rearm_factor,
                                              max_cmdline_chars=s.process.max_cmdline_chars),
                                          source=PsutilProcessSource(),
                                          exits=ProcConnectorExits()
                                          if s.process.exit_status else None),
        "journal": lambda: JournalWatcher(ctx, s.journal,
                                          claim=security.claims if security else None),
        "services": lambda: ServicesWatcher(ctx, interval_s=s.services.interval_s,
                                            source=SystemctlUnits(),
                                            available=systemd_unavailable_reason),
        "storage": lambda: StorageWatcher(ctx, s.storage, source=PsutilStorage(
            s.storage.paths, s.storage.include_partitions)),
        "filesystem": lambda: FilesystemWatcher(ctx, s.filesystem),
        "network": lambda: NetworkWatcher(ctx, s.network, source=PsutilNetwork()),
        "nixos": lambda: NixosWatcher(ctx, s.nixos),
        "packages": lambda: PackagesWatcher(ctx, s.packages, s.packages_state_file),
        "sessions": lambda: SessionsWatcher(ctx, interval_s=s.sessions.interval_s,
                                            source=psutil_sessions),
        "timers": lambda: TimersWatcher(ctx, interval_s=s.timers.interval_s,
                                        source=SystemctlTimers(),
                                        available=systemd_unavailable_reason),
        "hardware": lambda: HardwareWatcher(ctx, s.hardware,
                                            source=SystemHardware(s.hardware.sysfs_root)),
        "pressure": lambda: PressureWatcher(ctx, s.pressure, source=SystemPressure(
            s.pressure.proc_root, s.pressure.top_sample_s), page_size=page_size()),
        "containers": lambda: ContainersWatcher(ctx, s.containers),
        "reclaimable": lambda: ReclaimableWatcher(ctx, s.reclaimable),
        "security": lambda: security,
        "ports": lambda: PortsWatcher(ctx, s.ports, source=PsutilPorts(),
                                      as_root=running_as_root()),
        "firewall": lambda: FirewallWatcher(ctx, s.firewall),
    }
    enabled: list[Watcher] = []
    disabled: list[str] = []
    for name in WATCHER_NAMES:
        if getattr(s, name).enabled:
            enabled.append(factories[name]())
        else:
            disabled.append(name)
    return enabled, disabled


def build(settings: Settings, *, publisher: Publisher | None = None, clock: Clock | None = None,
          watchers: list[Watcher] | None = None, metrics: Metrics | None = None) -> Container:
    """`publisher`, `clock`, `watchers` and `metrics` replace the real ones in tests."""
    clock = clock or SystemClock()
    metrics = metrics or Metrics()
    ctx = EventContext(namespace=settings.namespace, hostname=settings.hostname, clock=clock,
                       machine_id=local_host(settings.home).machine_id)
    if watchers is None:
        watchers, disabled = build_watchers(settings, ctx)
    else:
        disabled = []
    if publisher is None:
        publisher = NatsPublisher(
            nats_url=settings.nats_url, topology=settings.topology, spool=settings.spool_dir,
            metrics=metrics, publish_timeout_s=settings.publish_timeout_s,
            connect_timeout_s=settings.connect_timeout_s,
            reconnect_wait_s=settings.reconnect_wait_s,
            drain_interval_s=settings.spool.drain_interval_s,
            max_spool_events=settings.spool.max_events, max_spool_bytes=settings.spool.max_bytes,
            as_host=settings.hostname if settings.remote else None)
    rl = settings.rate_limit
    limiter = RateLimiter(per_watcher_per_hour=rl.per_watcher_per_hour,
                          per_watcher_burst=rl.per_watcher_burst,
                          global_per_hour=rl.global_per_hour, global_burst=rl.global_burst,
                          monotonic=clock.monotonic)
    handler = EventHandler(publisher, limiter, metrics)
    runner = WatcherRunner(watchers, handler, metrics, disabled=disabled,
                           recheck_s=settings.unavailable_recheck_s)
    return Container(settings=settings, metrics=metrics, publisher=publisher, limiter=limiter,
                     runner=runner)
