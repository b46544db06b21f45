"""`totalrecall run`: the whole stack as supervised local processes, no Docker.

nats-server (JetStream) and Postgres first, then the four services, each its own process group.
A crashed process is restarted with backoff; SIGINT/SIGTERM stops everything, services first,
and leaves nothing behind (children also get SIGTERM if this supervisor itself dies).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .infra import NatsServer, PostgresServer, http_ok
from .infra.nats_store_watch import NatsStoreWatch
from .infra.ports import Ports
from .infra.process import spawn, stop
from .paths import default_model_path, home

DATABASE = "totalrecall"
#: sysexits.h EX_CONFIG: a service that exits with it cannot start as configured (e.g. the
#: recall API on a public address without a token); restarting it would only repeat the refusal.
EX_CONFIG = 78


class ConfigRefused(RuntimeError):
    """A service refused its configuration: `totalrecall run` stops with its reason."""


@dataclass
class Service:
    name: str
    module: str
    env_prefix: str
    port: int
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0
    next_start: float = 0.0
    backoff: float = 1.0
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def health_url(self) -> str:
        path = "/memory/health" if self.name == "recall-api" else "/health"
        return f"http://127.0.0.1:{self.port}{path}"


def _log(msg: str) -> None:
    print(f"[totalrecall] {msg}", flush=True)


def _last_line(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


class Supervisor:
    def __init__(self, state: Path, ports: Ports, services: list[str] | None = None,
                 prometheus: bool = False) -> None:
        self.state = state
        self.prometheus = prometheus
        self.prom_proc: subprocess.Popen[bytes] | None = None
        self.ports = ports
        self.logs = state / "logs"
        self.nats = NatsServer(state / "nats", port=ports.nats, monitor_port=ports.nats_monitor,
                               log_path=self.logs / "nats-server.log")
        self.pg = PostgresServer(state / "pg", port=ports.postgres)
        self.nats_store = NatsStoreWatch(self.logs / "nats-server.log", state / "nats")
        self.stopping = False
        base = {
            "TOTALRECALL_HOME": str(state),
            "PYTHONUNBUFFERED": "1",
        }
        nats_url, pg_dsn = self.nats.url, self.pg.dsn(DATABASE)
        specs = [
            Service("indexer", "totalrecall_indexer", "TR_INDEXER_", ports.indexer),
            Service("embedder", "totalrecall_embedder", "TR_EMBEDDER_", ports.embedder,
                    extra_env={"TR_EMBEDDER_MODEL_PATH": os.environ.get(
                        "TR_EMBEDDER_MODEL_PATH", str(default_model_path()))}),
            Service("recall-api", "totalrecall_recall_api", "TR_RECALL_", ports.api),
            Service("watchers", "totalrecall_watchers", "TR_WATCHERS_", ports.watchers),
        ]
        self.services = [s for s in specs if services is None or s.name in services]
        for s in self.services:
            s.extra_env = {**base, f"{s.env_prefix}NATS_URL": nats_url,
                           f"{s.env_prefix}PG_DSN": pg_dsn, f"{s.env_prefix}HTTP_PORT": str(s.port),
                           **s.extra_env}

    # --- lifecycle -------------------------------------------------------------------------
    def _start_service(self, s: Service) -> None:
        env = {**os.environ, **s.extra_env}
        s.proc = spawn([sys.executable, "-m", s.module], log_path=self.logs / f"{s.name}.log",
                       env=env)
        s.started_at = time.monotonic()
        _log(f"started {s.name} (pid {s.proc.pid}, log {self.logs / (s.name + '.log')})")

    def start(self, ready_timeout: float = 180.0) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        _log(f"state in {self.state}")
        self.nats_store.skip_existing()
        self.nats.start()
        _log(f"nats-server with JetStream at {self.nats.url}")
        self.pg.start()
        self.pg.create_database(DATABASE)
        _log(f"postgres at {self.pg.dsn(DATABASE)}")
        self._ensure_model()
        for s in self.services:
            self._start_service(s)
        if self.prometheus:
            self._start_prometheus()
        deadline = time.monotonic() + ready_timeout
        pending = list(self.services)
        while pending and not self.stopping:
            self.supervise_once()
            pending = [s for s in pending if not http_ok(s.health_url)]
            if time.monotonic() > deadline:
                raise TimeoutError("not healthy in time: " + ", ".join(s.name for s in pending))
            time.sleep(0.2)

    def _ensure_model(self) -> None:
        """First run without the default model (bootstrap skipped, or an old build elsewhere):
        build it into the shared store now rather than start keyword-only."""
        if not any(s.name == "embedder" for s in self.services):
            return
        if os.environ.get("TR_EMBEDDER_MODEL_PATH") or default_model_path().is_file():
            return
        from .model_build import BuildError, build, default_out

        out = default_out()
        _log(f"no embedding model found; building it once into {out} (a few minutes)")
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            build(out)
        except (BuildError, OSError) as exc:  # the stack still starts, loudly degraded
            _log(f"model build failed: {exc}")
        for s in self.services:
            if s.name == "embedder":
                s.extra_env["TR_EMBEDDER_MODEL_PATH"] = str(default_model_path())

    def _start_prometheus(self) -> None:
        """A local Prometheus (Debian's package) scraping this stack, with the alert rules."""
        import shutil

        binary = shutil.which("prometheus")
        if binary is None:
            _log("--prometheus: no prometheus binary (apt-get install prometheus); skipped")
            return
        conf_dir = self.state / "prometheus"
        conf_dir.mkdir(parents=True, exist_ok=True)
        rules = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "rules.yml"
        targets = {"recall-api": self.ports.api, "embedder": self.ports.embedder,
                   "indexer": self.ports.indexer, "watchers": self.ports.watchers}
        lines = ["global: {scrape_interval: 15s, evaluation_interval: 15s}"]
        if rules.exists():
            shutil.copy(rules, conf_dir / "rules.yml")
            lines.append("rule_files: [rules.yml]")
        lines.append("scrape_configs:")
        for name, port in targets.items():
            lines.append(f"  - {{job_name: totalrecall-{name}, "
                         f"static_configs: [{{targets: ['127.0.0.1:{port}']}}]}}")
        (conf_dir / "prometheus.yml").write_text("\n".join(lines) + "\n")
        self.prom_proc = spawn(
            [binary, f"--config.file={conf_dir / 'prometheus.yml'}",
             f"--storage.tsdb.path={conf_dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.ports.prometheus}"],
            log_path=self.logs / "prometheus.log")
        _log(f"prometheus at http://127.0.0.1:{self.ports.prometheus}")

    def supervise_once(self) -> None:
        now = time.monotonic()
        for proc_owner, name in ((self.nats, "nats-server"), (self.pg, "postgres")):
            if proc_owner.proc is not None and proc_owner.proc.poll() is not None and not self.stopping:
                _log(f"{name} exited ({proc_owner.proc.returncode}); restarting")
                proc_owner.start()
        why = None if self.stopping else self.nats_store.restart_reason()
        if why:
            _log(f"restarting nats-server: {why}")
            self.nats.stop()
            self.nats.start()
        for s in self.services:
            if s.proc is None or s.proc.poll() is None or self.stopping:
                if s.proc is not None and now - s.started_at > 60:
                    s.backoff = 1.0  # stable for a minute: forget earlier crashes
                continue
            if s.proc.returncode == EX_CONFIG:
                reason = _last_line(self.logs / f"{s.name}.log")
                raise ConfigRefused(f"{s.name} refused to start: {reason}")
            if s.next_start == 0.0:
                s.next_start = now + s.backoff
                _log(f"{s.name} exited with {s.proc.returncode}; restarting in {s.backoff:.0f}s")
                s.backoff = min(s.backoff * 2, 30.0)
            elif now >= s.next_start:
                s.next_start = 0.0
                s.restarts += 1
                self._start_service(s)

    def shutdown(self) -> None:
        self.stopping = True
        _log("stopping services")
        for s in self.services:
            if s.proc is not None and s.proc.poll() is None:
                os.killpg(s.proc.pid, signal.SIGTERM)
        for s in self.services:
            if s.proc is not None:
                stop(s.proc, timeout=15)
        if self.prom_proc is not None:
            stop(self.prom_proc)
        self.pg.stop()
        self.nats.stop()
        _log("stopped")


def _announce(sup: Supervisor) -> None:
    """"Up", or, loudly, what runs degraded and why (never a quiet keyword-only start)."""
    from .status import collect

    report = collect(sup.ports)
    started = {s.name for s in sup.services}
    bad = {n: p for n, p in report["parts"].items() if n in started and p["status"] != "ok"}
    if bad:
        rule = "!" * 78
        _log(rule)
        _log("Total Recall is up but DEGRADED:")
        for name, part in bad.items():
            for reason in part["reasons"] or [part["status"]]:
                _log(f"  {name}: {reason}")
        _log("`totalrecall status` shows the health of each part.")
        _log(rule)
    else:
        _log("Total Recall is up.")
    _log(f"Recall API: http://127.0.0.1:{sup.ports.api}  (`totalrecall status`; "
         "Ctrl-C stops everything)")


def run(services: list[str] | None = None, prometheus: bool = False) -> int:
    sup = Supervisor(home(), Ports.from_env(), services, prometheus=prometheus)

    def _on_signal(signum: int, _frame: object) -> None:
        sup.stopping = True

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        sup.start()
        if not sup.stopping:
            _announce(sup)
        while not sup.stopping:
            sup.supervise_once()
            time.sleep(0.5)
    except Exception as exc:  # noqa: BLE001 - report, then clean up whatever started
        _log(f"error: {exc}")
        sup.shutdown()
        return 1
    sup.shutdown()
    return 0
