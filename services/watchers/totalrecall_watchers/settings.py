"""Settings of the watchers service (env prefix `TR_WATCHERS_`, nested with `__`).

Examples: `TR_WATCHERS_PROCESS__INTERVAL_S=1`, `TR_WATCHERS_PROCESS__CPU_PERCENT=40`,
`TR_WATCHERS_JOURNAL__ENABLED=false`,
`TR_WATCHERS_FILESYSTEM__PATHS='["/etc/nixos","/home/me/src"]'` (lists are JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, Field
from pydantic_settings import SettingsConfigDict
from totalrecall_schema.host import local_host
from totalrecall_schema.service_settings import ServiceSettings


class WatcherSettings(BaseModel):
    enabled: bool = True
    interval_s: float = Field(default=60.0, gt=0)


class ProcessSettings(WatcherSettings):
    interval_s: float = Field(default=30.0, gt=0)
    #: Percent of ONE core, averaged over one interval (cpu-time delta / wall-time delta).
    cpu_percent: float = Field(default=50.0, gt=0)
    #: A process is high-memory when its RSS is over `rss_mb` OR over `mem_percent` of RAM.
    rss_mb: float = Field(default=2048.0, gt=0)
    mem_percent: float = Field(default=25.0, gt=0)
    #: An alert re-arms when usage falls below threshold × rearm_factor (hysteresis).
    rearm_factor: float = Field(default=0.8, gt=0, le=1)
    max_cmdline_chars: int = 1000
    #: Learn how a tracked process ended (exit code or signal) from the kernel's process
    #: connector (root/CAP_NET_ADMIN) or its zombie; without it an exit is reported as unknown.
    exit_status: bool = True


class JournalSettings(WatcherSettings):
    command: list[str] = Field(default_factory=lambda: [
        "journalctl", "--follow", "--output=json", "--lines=0", "--priority=warning"])
    #: Only entries with PRIORITY <= this (0 emerg … 4 warning … 7 debug).
    max_priority: int = 4
    dedup_window_s: float = 300.0
    #: Skip the "is there a journal at all" check (tests run a fake command).
    skip_availability_check: bool = False
    #: Follow journald (when the machine has one).
    journald: bool = True
    #: Application text logs, always tailed: error/warning lines become `error/application`.
    log_files: list[str] = Field(default_factory=list)
    #: Syslog text files, tailed only when there is no journald (classified like the journal).
    syslog_files: list[str] = Field(default_factory=lambda: ["/var/log/syslog",
                                                             "/var/log/messages"])
    #: How often the text logs are checked for new lines.
    log_poll_s: float = Field(default=0.5, gt=0)


class ServicesSettings(WatcherSettings):
    interval_s: float = Field(default=60.0, gt=0)


class TimersSettings(WatcherSettings):
    interval_s: float = Field(default=60.0, gt=0)


class StorageThresholds(BaseModel):
    """Thresholds of one filesystem; None falls back to the watcher-wide value."""

    warn_percent: float | None = Field(default=None, gt=0, le=100)
    critical_percent: float | None = Field(default=None, gt=0, le=100)
    inode_warn_percent: float | None = Field(default=None, gt=0, le=100)
    inode_critical_percent: float | None = Field(default=None, gt=0, le=100)


class StorageSettings(WatcherSettings):
    interval_s: float = Field(default=60.0, gt=0)
    warn_percent: float = 90.0
    critical_percent: float = 95.0
    #: Inode thresholds (default: the space ones).
    inode_warn_percent: float | None = None
    inode_critical_percent: float | None = None
    #: Per mountpoint or extra path, e.g. `TR_WATCHERS_STORAGE__THRESHOLDS='{"/boot":
    #: {"warn_percent": 80, "critical_percent": 90}}'` (fractional percents allowed).
    thresholds: dict[str, StorageThresholds] = Field(default_factory=dict)
    #: Extra paths to check; the real (physical) partitions are always included.
    paths: list[str] = Field(default_factory=list)
    include_partitions: bool = True


class FilesystemSettings(WatcherSettings):
    paths: list[str] = Field(default_factory=lambda: ["/etc/nixos"])
    #: Repeated changes of the same path within this window become one event.
    coalesce_s: float = 60.0
    debounce_ms: int = 500
    force_polling: bool = False
    #: Say which process, user and command wrote a file (fanotify: root only; not for
    #: deletions), marking at most `writers_max_dirs` directories of the watched trees.
    writers: bool = True
    writers_max_dirs: int = Field(default=10_000, gt=0)
    ignore_dirs: list[str] = Field(default_factory=lambda: [
        ".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache",
        ".pytest_cache", ".ruff_cache", ".cache", ".direnv", "build", "dist", "target", "result",
        ".tox", ".idea", ".gradle"])
    #: Trees never reported (besides these, $TOTALRECALL_HOME itself: no feedback loops).
    ignore_paths: list[str] = Field(default_factory=list)
    ignore_suffixes: list[str] = Field(default_factory=lambda: [
        "~", ".swp", ".swx", ".swo", ".tmp", ".temp", ".part", ".crdownload", ".pyc", ".pyo",
        ".o", ".a", ".so", ".lock", ".log", ".bak"])


class NetworkSettings(WatcherSettings):
    interval_s: float = Field(default=60.0, gt=0)
    #: Resolve `dns_host` every interval; off by default (the machine may have no internet).
    dns_check: bool = False
    dns_host: str = "nixos.org"
    dns_timeout_s: float = 5.0


class NixosSettings(WatcherSettings):
    interval_s: float = Field(default=30.0, gt=0)
    profiles_dir: str = "/nix/var/nix/profiles"
    diff_closures: bool = True


class PackagesSettings(WatcherSettings):
    """Package installs/upgrades/removals on any distribution (core/packages.py)."""

    interval_s: float = Field(default=30.0, gt=0)
    #: dpkg/apt: the log tailed from a persisted offset (rotation to `<log>.1` followed).
    dpkg: bool = True
    dpkg_log: str = "/var/log/dpkg.log"
    #: apt's history (the command and user behind a dpkg change); "" to leave it.
    apt_history: str = "/var/log/apt/history.log"
    #: pip: environments (venv/prefix roots or site-packages directories) diffed against a
    #: snapshot. None: `/usr/local/lib/python3*/*-packages` and `~/.local/lib/python3*/...`.
    pip: bool = True
    pip_environments: list[str] | None = None
    #: npm global packages (`npm ls -g --json --depth=0`); skipped when npm is not installed.
    npm: bool = True
    npm_command: list[str] = Field(default_factory=lambda: [
        "npm", "ls", "-g", "--json", "--depth=0"])
    #: More changes than this of one manager in one poll (an `apt upgrade`) become one event.
    max_individual: int = Field(default=10, ge=1)
    #: Offsets and snapshots; default `$TOTALRECALL_HOME/state/watchers/packages.json`.
    state_file: str | None = None


class SessionsSettings(WatcherSettings):
    interval_s: float = Field(default=30.0, gt=0)


class HardwareSettings(WatcherSettings):
    interval_s: float = Field(default=30.0, gt=0)
    #: USB attach/detach from `<sysfs_root>/bus/usb/devices`.
    usb: bool = True
    #: Battery charge (psutil) and AC power plugged/unplugged.
    battery: bool = True
    #: Reported at or below these while not on AC (and once when back above the warning level).
    battery_warn_percent: float = Field(default=20.0, gt=0, le=100)
    battery_critical_percent: float = Field(default=10.0, gt=0, le=100)
    #: Temperature sensors and fans (psutil).
    sensors: bool = True
    #: Used when a sensor gives no `high` / `critical` of its own.
    temp_warn_c: float = 85.0
    temp_critical_c: float = 95.0
    #: A hot sensor is back to normal this many degrees below its warning level.
    temp_hysteresis_c: float = Field(default=5.0, ge=0)
    #: Where sysfs is mounted (tests point it at a fake tree).
    sysfs_root: str = "/sys"


class ReclaimableSettings(WatcherSettings):
    """What could be freed (core/reclaimable.py): caches, the journal, old generations. Measured,
    never deleted."""

    interval_s: float = Field(default=3600.0, gt=0)
    #: The filesystem root the places are under (tests: a tree of their own).
    root: str = "/"
    #: No event while the total is under this.
    min_total_bytes: int = Field(default=512 * 2**20, ge=0)
    #: A new event once the total moved by this fraction since the last one.
    change_fraction: float = Field(default=0.25, gt=0)
    #: Files looked at per place at most (a size beyond is a lower bound).
    max_files: int = Field(default=500_000, gt=0)


class PressureSettings(WatcherSettings):
    """System pressure (core/pressure.py): memory, swap, PSI and load; a threshold of 0 switches
    its check off."""

    interval_s: float = Field(default=10.0, gt=0)
    #: Memory used (total - available) in percent; critical from `memory_critical_percent`.
    memory_percent: float = Field(default=90.0, ge=0, le=100)
    memory_critical_percent: float = Field(default=97.0, ge=0, le=100)
    #: Swap used in percent (skipped without swap).
    swap_percent: float = Field(default=50.0, ge=0, le=100)
    #: Pages swapped in + out per second over one interval (`pswpin`/`pswpout` of vmstat).
    swap_pages_per_s: float = Field(default=1000.0, ge=0)
    #: PSI `avg10` (percent of the last 10 s some / all tasks were stalled); `full` is critical.
    psi_cpu_some: float = Field(default=50.0, ge=0, le=100)
    psi_memory_some: float = Field(default=10.0, ge=0, le=100)
    psi_memory_full: float = Field(default=5.0, ge=0, le=100)
    psi_io_some: float = Field(default=20.0, ge=0, le=100)
    psi_io_full: float = Field(default=0.0, ge=0, le=100)
    #: The 1-minute load average divided by the logical CPUs.
    load_per_core: float = Field(default=2.0, ge=0)
    #: A pressure re-arms (one `recovered` event) below threshold × rearm_factor.
    rearm_factor: float = Field(default=0.8, gt=0, le=1)
    #: The snapshot of a crossing: top N processes by CPU (measured over `top_sample_s`) and RSS.
    top_n: int = Field(default=5, ge=1, le=20)
    top_sample_s: float = Field(default=0.5, ge=0, le=5)
    max_cmdline_chars: int = Field(default=200, ge=16)
    #: Where procfs is mounted (PSI and vmstat are read there; tests point it at a fake tree).
    proc_root: str = "/proc"


Engine = Literal["podman", "docker"]
ContainerEvent = Literal["start", "stop", "exit", "die", "oom", "health"]


class ContainersSettings(WatcherSettings):
    """Containers of podman and docker (core/containers.py): lifecycle events followed as they
    happen (`<engine> events`), disk use (`<engine> system df`) every `interval_s`."""

    #: How often disk use is read (the lifecycle events are followed, not polled).
    interval_s: float = Field(default=600.0, gt=0)
    #: Each is used when its CLI exists and answers `version`.
    engines: list[Engine] = Field(default_factory=lambda: list(get_args(Engine)))
    #: The CLI of an engine when it is not the engine's name on PATH, e.g. `{"docker":
    #: "/usr/local/bin/docker"}`.
    cli: dict[str, str] = Field(default_factory=dict)
    #: The lifecycle events reported (`disk` is switched by `disk`).
    events: list[ContainerEvent] = Field(default_factory=lambda: list(get_args(ContainerEvent)))
    #: The same event of the same container (name, kind, exit code / health) once per window.
    dedup_window_s: float = Field(default=300.0, ge=0)
    #: How long a docker `oom` event waits for the `die` that usually follows (one event).
    oom_wait_s: float = Field(default=5.0, ge=0)
    #: The kernel log looked up for the OOM kill of a container dying with 137 ("": never).
    kernel_log: str = "/dev/kmsg"
    #: Labels kept in an event's metadata (compose project/service, pod, systemd unit).
    labels: list[str] = Field(default_factory=lambda: [
        "com.docker.compose.project", "com.docker.compose.service", "io.podman.compose.project",
        "com.docker.stack.namespace", "io.kubernetes.pod.name", "io.kubernetes.pod.namespace",
        "PODMAN_SYSTEMD_UNIT"])
    #: Disk use: an event when an engine's total or reclaimable bytes cross these (decimal GB,
    #: 0: off), once per crossing (re-armed below threshold × rearm_factor), or when one kind's
    #: size (images, containers, volumes, build cache) changed by `disk_change_fraction` of it
    #: and at least `disk_min_change_gb` since the last report.
    disk: bool = True
    disk_total_gb: float = Field(default=50.0, ge=0)
    disk_reclaimable_gb: float = Field(default=5.0, ge=0)
    disk_change_fraction: float = Field(default=0.25, ge=0)
    disk_min_change_gb: float = Field(default=1.0, ge=0)
    rearm_factor: float = Field(default=0.8, gt=0, le=1)
    #: `version`, `system df` and `container inspect` are given this long.
    command_timeout_s: float = Field(default=60.0, gt=0)


class SecuritySettings(WatcherSettings):
    """sudo, su, failed logins, users and groups from the auth log (core/security.py)."""

    #: Follow journald's auth and authpriv facilities (every priority) when there is one.
    journald: bool = True
    command: list[str] = Field(default_factory=lambda: [
        "journalctl", "--follow", "--output=json", "--lines=0", "SYSLOG_FACILITY=4",
        "SYSLOG_FACILITY=10"])
    #: Skip the "is there a journal at all" check (tests run a fake command).
    skip_availability_check: bool = False
    #: Text auth logs, tailed only without journald.
    log_files: list[str] = Field(default_factory=lambda: ["/var/log/auth.log",
                                                          "/var/log/secure"])
    log_poll_s: float = Field(default=0.5, gt=0)
    #: Identical lines of one process within this window are one event.
    dedup_window_s: float = Field(default=60.0, ge=0)
    #: This many failures of one remote host (else user) within the window are one error
    #: event, the rest of the window one more; over `global_burst_threshold` of all sources
    #: the same for all of them (0: off).
    burst_window_s: float = Field(default=60.0, gt=0)
    burst_threshold: int = Field(default=5, ge=0)
    global_burst_threshold: int = Field(default=20, ge=0)
    #: An account change is attributed to the sudo that ran its tool this long before.
    attribution_window_s: float = Field(default=120.0, ge=0)
    max_command_chars: int = Field(default=500, ge=32)


class PortsSettings(WatcherSettings):
    """Listening sockets appearing and going away (core/ports.py)."""

    interval_s: float = Field(default=30.0, gt=0)
    #: Bound UDP sockets too (off: resolvers and clients bind ephemeral ones all the time).
    udp: bool = False
    #: Ports never reported.
    ignore_ports: list[int] = Field(default_factory=list)
    max_cmdline_chars: int = Field(default=300, ge=32)


class FirewallSettings(WatcherSettings):
    """Firewall rule changes (core/firewall.py): `nft`, else `iptables-save`."""

    interval_s: float = Field(default=60.0, gt=0)
    #: `auto` (nft when it works, else iptables-save), `nft` or `iptables`.
    tool: str = Field(default="auto", pattern="^(auto|nft|iptables)$")
    nft_command: list[str] = Field(default_factory=lambda: ["nft", "--stateless", "list",
                                                            "ruleset"])
    iptables_commands: list[list[str]] = Field(default_factory=lambda: [["iptables-save"],
                                                                        ["ip6tables-save"]])
    timeout_s: float = Field(default=15.0, gt=0)
    #: Rule lines shown in an event's detail (the summary names the first three).
    max_diff_lines: int = Field(default=40, ge=1)


class RateLimitSettings(BaseModel):
    """Token buckets: design budget 50–200 events/hour at steady state, bursts allowed."""

    per_watcher_per_hour: float = 100.0
    per_watcher_burst: float = 20.0
    global_per_hour: float = 200.0
    global_burst: float = 60.0


class SpoolSettings(BaseModel):
    #: Default `$TOTALRECALL_HOME/spool/watchers/` (one fsynced file per event).
    dir: str | None = None
    max_events: int = Field(default=10_000, gt=0)
    max_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    drain_interval_s: float = 5.0


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TR_WATCHERS_", env_nested_delimiter="__",
                                      extra="ignore")

    http_port: int = 8768
    namespace: str = "default"
    #: The host every event names (default: `TOTALRECALL_HOSTNAME`, else the machine's name).
    hostname: str = Field(default_factory=lambda: local_host().hostname)
    #: A remote host of a cluster (deploy/nats/cluster/): publish as `hostname` on
    #: `<prefix>.host.<hostname>.events.<category>`, the only subjects its NATS user (in
    #: `NATS_URL`) may publish on; the services create the streams. Off: the workstation's own
    #: `<prefix>.events.<category>`.
    remote: bool = False
    publish_timeout_s: float = 5.0
    connect_timeout_s: float = 2.0
    reconnect_wait_s: float = 1.0
    log_level: str = "info"
    #: An unavailable watcher (its tool, file or socket missing) is looked for again this often,
    #: and runs from the moment its source appears.
    unavailable_recheck_s: float = Field(default=60.0, gt=0)

    process: ProcessSettings = Field(default_factory=ProcessSettings)
    journal: JournalSettings = Field(default_factory=JournalSettings)
    services: ServicesSettings = Field(default_factory=ServicesSettings)
    timers: TimersSettings = Field(default_factory=TimersSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    filesystem: FilesystemSettings = Field(default_factory=FilesystemSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    nixos: NixosSettings = Field(default_factory=NixosSettings)
    sessions: SessionsSettings = Field(default_factory=SessionsSettings)
    packages: PackagesSettings = Field(default_factory=PackagesSettings)
    hardware: HardwareSettings = Field(default_factory=HardwareSettings)
    pressure: PressureSettings = Field(default_factory=PressureSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    ports: PortsSettings = Field(default_factory=PortsSettings)
    firewall: FirewallSettings = Field(default_factory=FirewallSettings)
    containers: ContainersSettings = Field(default_factory=ContainersSettings)
    reclaimable: ReclaimableSettings = Field(default_factory=ReclaimableSettings)
    rate_limit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    spool: SpoolSettings = Field(default_factory=SpoolSettings)

    @property
    def packages_state_file(self) -> Path:
        if self.packages.state_file:
            return Path(self.packages.state_file).expanduser()
        return self.home / "state" / "watchers" / "packages.json"

    @property
    def spool_dir(self) -> Path:
        if self.spool.dir:
            return Path(self.spool.dir).expanduser()
        return self.home / "spool" / "watchers"
