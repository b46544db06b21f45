"""deploy/nats/cluster/: the shipped users.conf is what users.py writes, and a host's user may
publish only on the subjects `Topology` gives that host (tests/integration/deploy/
test_nats_cluster.py runs the cluster)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
from totalrecall_schema import Topology

CLUSTER = Path(__file__).resolve().parents[3] / "deploy" / "nats" / "cluster"


def users_py() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cluster_users", CLUSTER / "users.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_shipped_users_conf_is_generated() -> None:
    assert (CLUSTER / "users.conf").read_text() == users_py().render([])


def test_a_host_user_publishes_its_own_events_only() -> None:
    text = users_py().render(["db-01.lan"], prefix="tdemo")
    topo = Topology(prefix="tdemo")
    assert '{user: $NATS_USER, password: $NATS_PASSWORD}' in text
    (block,) = re.findall(r'\{user: "host-db-01_lan".*?\n  \}\}', text, re.S)
    assert "password: $NATS_HOST_DB_01_LAN_PASSWORD," in block
    assert f'publish: {{allow: ["{topo.host_events_of("db-01.lan")}"]' in block
    assert f'subscribe: {{allow: ["{topo.host_inbox_prefix("db-01.lan")}.>"], ' \
           f'deny: ["tdemo.>", "$JS.>"]}}' in block
    assert "--prefix tdemo" in text


def test_hosts_whose_password_variables_collide_are_refused() -> None:
    with pytest.raises(ValueError, match="NATS_HOST_DB_01_PASSWORD"):
        users_py().render(["db-01", "db.01"])
    assert users_py().render(["db-01", "DB-01"]).count('"host-db-01"') == 1


def test_node_conf_takes_every_node_value_from_the_environment() -> None:
    text = (CLUSTER / "node.conf").read_text()
    body = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    for var in ("NATS_SERVER_NAME", "NATS_HOST", "NATS_PORT", "NATS_HTTP_PORT",
                "NATS_CLUSTER_PORT", "NATS_STORE_DIR", "NATS_ROUTES", "NATS_ROUTE_USER",
                "NATS_ROUTE_PASSWORD"):
        assert f"${var}" in body, var
    assert 'include "users.conf"' in body and "jetstream: enabled" in body
    secrets = re.findall(r"password:\s*(\S+)", body)
    assert secrets and all(v.startswith("$") for v in secrets)  # no literal secret
