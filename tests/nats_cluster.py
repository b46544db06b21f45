"""The shipped 3-node JetStream cluster (deploy/nats/cluster/) as three real nats-server
processes on loopback: the shipped `node.conf`, and a `users.conf` that `users.py` renders for
the given hosts; only the environment (free ports, test passwords) is the test's own."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from totalrecall.infra import free_ports
from totalrecall.infra.nats_server import nats_server_binary
from totalrecall.infra.ports import http_ok
from totalrecall.infra.process import spawn, stop

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "deploy" / "nats" / "cluster"


def _users_module() -> Any:
    spec = importlib.util.spec_from_file_location("cluster_users", CLUSTER / "users.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def host_user(host: str) -> str:
    """The NATS user of a remote host (as users.py names it)."""
    return str(_users_module().user_name(host))


def host_password_variable(host: str) -> str:
    return str(_users_module().password_variable(host))


@dataclass
class Node:
    name: str
    port: int
    http_port: int
    cluster_port: int
    store: Path
    proc: subprocess.Popen[bytes] | None = None
    #: The address it listens on (clients, routes, monitoring).
    bind: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"nats://{self.bind}:{self.port}"

    def healthy(self, js_only: bool = True) -> bool:
        query = "?js-enabled-only=true" if js_only else ""
        return http_ok(f"http://{self.bind}:{self.http_port}/healthz{query}")


class NatsCluster:
    """`passwords`: the services' (`NATS_PASSWORD`), the routes' (`NATS_ROUTE_PASSWORD`) and
    each host's (`host_password_variable`). `bind`: the address the nodes listen on (loopback,
    or a bridge's that simulated hosts in network namespaces reach: `tests/netns.py`)."""

    def __init__(self, root: Path, hosts: list[str], passwords: dict[str, str],
                 size: int = 3, bind: str = "127.0.0.1") -> None:
        self.conf_dir = root / "conf"
        self.conf_dir.mkdir(parents=True)
        self.passwords = passwords
        shutil.copy(CLUSTER / "node.conf", self.conf_dir / "node.conf")
        users = subprocess.run([sys.executable, str(CLUSTER / "users.py"), *hosts],
                               capture_output=True, text=True, check=True).stdout
        (self.conf_dir / "users.conf").write_text(users)
        ports = free_ports(3 * size)
        self.nodes = [Node(f"nats-{i + 1}", *ports[3 * i:3 * i + 3], store=root / f"n{i + 1}",
                           bind=bind)
                      for i in range(size)]
        self.bind = bind
        self.root = root

    def env(self, node: Node) -> dict[str, str]:
        routes = ", ".join(f'"nats-route://route:{self.passwords["NATS_ROUTE_PASSWORD"]}'
                           f'@{self.bind}:{n.cluster_port}"' for n in self.nodes)
        own = {"NATS_SERVER_NAME": node.name, "NATS_HOST": self.bind,
               "NATS_PORT": str(node.port), "NATS_HTTP_PORT": str(node.http_port),
               "NATS_CLUSTER_PORT": str(node.cluster_port), "NATS_STORE_DIR": str(node.store),
               "NATS_ROUTES": f"[{routes}]", "NATS_USER": "services",
               "NATS_ROUTE_USER": "route"}
        quoted = {k: f'"{v}"' for k, v in {**own, **self.passwords}.items()
                  if not k.endswith("PORT") and k != "NATS_ROUTES"}
        return {"PATH": os.environ.get("PATH", ""), **own, **quoted}

    def start(self, node: Node) -> None:
        node.proc = spawn([nats_server_binary(), "-c", str(self.conf_dir / "node.conf")],
                          log_path=self.root / f"{node.name}.log", env=self.env(node))

    def kill(self, node: Node) -> None:
        assert node.proc is not None
        os.killpg(node.proc.pid, signal.SIGKILL)
        node.proc.wait(timeout=10)
        node.proc = None

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def services_url(self, first: Node | None = None) -> str:
        """NATS_URL as a service of the cluster sets it: every node, with the credentials."""
        order = ([first] if first else []) + [n for n in self.nodes if n is not first]
        return ",".join(f"nats://services:{self.passwords['NATS_PASSWORD']}@{self.bind}:{n.port}"
                        for n in order)

    def host_url(self, host: str) -> str:
        """NATS_URL of a remote host's watchers: every node, with that host's credentials."""
        user, pw = host_user(host), self.passwords[host_password_variable(host)]
        return ",".join(f"nats://{user}:{pw}@{self.bind}:{n.port}" for n in self.nodes)

    def stop(self) -> None:
        for n in self.nodes:
            if n.proc is not None:
                stop(n.proc)
                n.proc = None
