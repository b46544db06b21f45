"""docker-compose.yml validated offline with docker-compose 1.29 from PyPI (no Docker engine here).

scripts/compose-venv.sh builds that docker-compose once (~15 s with a warm pip cache, about a
minute cold) in a cache directory outside the repository, then reuses it. The test fails when it
cannot be built, unless TR_ALLOW_MISSING_COMPOSE=1.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
APPS = ("embedder", "embedder-cpu", "indexer", "recall-api", "watchers")
NODES = ("nats-1", "nats-2", "nats-3")

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def docker_compose() -> str:
    try:
        out = subprocess.run([str(REPO / "scripts/compose-venv.sh")], capture_output=True,
                             text=True, check=True, timeout=840).stdout
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        if os.environ.get("TR_ALLOW_MISSING_COMPOSE") == "1":
            pytest.skip(f"docker-compose 1.29 venv unavailable and TR_ALLOW_MISSING_COMPOSE=1: {exc}")
        stderr = getattr(exc, "stderr", "") or ""
        pytest.fail(f"scripts/compose-venv.sh failed (needs PyPI once): {exc}\n{stderr}")
    return out.strip().splitlines()[-1]


def _config(dc: str, env_file: Path, *extra: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("COMPOSE_", "NATS_", "POSTGRES_", "TR_", "GRAFANA_", "WATCH_"))}
    return subprocess.run([dc, "--env-file", str(env_file), "-f", str(REPO / "docker-compose.yml"),
                           "config", *extra], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={**clean, **(env or {})})


@pytest.fixture(scope="module")
def env_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_file = tmp_path_factory.mktemp("compose") / ".env"
    shutil.copy(REPO / ".env.example", env_file)
    return env_file


@pytest.fixture(scope="module")
def compose_config(docker_compose: str, env_example: Path) -> dict[str, Any]:
    r = _config(docker_compose, env_example)
    assert r.returncode == 0, r.stderr
    return dict(yaml.safe_load(r.stdout))


def test_every_service_is_there_with_healthchecks(compose_config: dict[str, Any]) -> None:
    services = compose_config["services"]
    assert set(services) == {"nats", *NODES, "postgres", *APPS, "prometheus", "grafana"}
    for name in ("nats", "postgres", *APPS):
        assert "healthcheck" in services[name], name
    for name in APPS:
        svc = name.removesuffix("-cpu")
        assert services[name]["build"]["dockerfile"] == f"services/{svc}/Dockerfile"
        assert Path(services[name]["build"]["context"]) == REPO  # so it can COPY libs/schema
        assert (REPO / "services" / svc / "Dockerfile").exists()
        port = {"embedder": 8766, "indexer": 8767, "recall-api": 8765, "watchers": 8768}[svc]
        assert f"127.0.0.1:{port}/health" in " ".join(services[name]["healthcheck"]["test"])
    assert "/healthz" in " ".join(services["nats"]["healthcheck"]["test"])
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])


def test_dependency_order_waits_for_health(compose_config: dict[str, Any]) -> None:
    s = compose_config["services"]

    def conditions(name: str) -> dict[str, str]:
        return {k: v["condition"] for k, v in s[name]["depends_on"].items()}

    healthy = "service_healthy"
    assert conditions("recall-api") == {"nats": healthy, "postgres": healthy, "indexer": healthy}
    assert conditions("indexer") == {"nats": healthy, "postgres": healthy}
    for name in ("embedder", "embedder-cpu", "watchers"):
        assert conditions(name) == {"nats": healthy}, name


def test_gpu_and_cpu_embedders_are_profiles(compose_config: dict[str, Any], env_example: Path) -> None:
    s = compose_config["services"]
    devices = s["embedder"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    assert s["embedder"]["profiles"] == ["gpu"]
    assert s["embedder-cpu"]["profiles"] == ["cpu"] and "deploy" not in s["embedder-cpu"]
    assert s["embedder-cpu"]["networks"]["default"]["aliases"] == ["embedder"]
    assert s["embedder-cpu"]["environment"]["TR_EMBEDDER_DEVICE"] == "cpu"
    # both share the model volume, read-only
    for name in ("embedder", "embedder-cpu"):
        assert "models:/data/models:ro" in s[name]["volumes"], name
    assert re.search(r"^COMPOSE_PROFILES=gpu$", env_example.read_text(), re.M)
    # no service may depend on the embedder: under the other profile it does not exist
    for name, svc in s.items():
        assert not {"embedder", "embedder-cpu"} & set(svc.get("depends_on", {})), name


def test_cpu_profile_validates(docker_compose: str, env_example: Path) -> None:
    r = _config(docker_compose, env_example, "-q", env={"COMPOSE_PROFILES": "cpu"})
    assert r.returncode == 0, r.stderr


def test_credentials_come_from_the_environment(compose_config: dict[str, Any]) -> None:
    s = compose_config["services"]
    assert s["postgres"]["environment"]["POSTGRES_PASSWORD"] == "change-me-postgres"
    # quoted: nats.conf parses the variable as a value (a bare 9e5c22… would be a number)
    assert s["nats"]["environment"]["NATS_PASSWORD"] == '"change-me-nats"'
    assert s["nats"]["environment"]["NATS_USER"] == '"totalrecall"'
    for name, prefix in (("embedder", "TR_EMBEDDER"), ("indexer", "TR_INDEXER"),
                         ("recall-api", "TR_RECALL"), ("watchers", "TR_WATCHERS")):
        assert s[name]["environment"][f"{prefix}_NATS_URL"] == \
            "nats://totalrecall:change-me-nats@nats:4222", name
    for name, var in (("indexer", "TR_INDEXER_PG_DSN"), ("recall-api", "TR_RECALL_PG_DSN")):
        assert s[name]["environment"][var] == \
            "postgresql://postgres:change-me-postgres@postgres:5432/totalrecall"
    api = s["recall-api"]["environment"]
    assert api["TR_RECALL_API_TOKEN"] == "change-me-api-token" and api["TR_RECALL_HTTP_HOST"] == "0.0.0.0"
    text = (REPO / "docker-compose.yml").read_text()
    for secret in ("NATS_USER", "NATS_PASSWORD", "POSTGRES_PASSWORD", "TR_RECALL_API_TOKEN",
                   "GRAFANA_ADMIN_PASSWORD"):
        uses = re.findall(r"\$\{" + secret + r"([^}]*)\}", text)
        assert uses and all(u.startswith(":?") for u in uses), (secret, uses)  # never a default


@pytest.mark.parametrize("secret", ["NATS_PASSWORD", "POSTGRES_PASSWORD", "TR_RECALL_API_TOKEN",
                                    "GRAFANA_ADMIN_PASSWORD"])
def test_missing_secret_is_refused(docker_compose: str, env_example: Path, tmp_path: Path,
                                   secret: str) -> None:
    env = tmp_path / ".env"
    env.write_text("".join(ln + "\n" for ln in env_example.read_text().splitlines()
                           if not ln.startswith(f"{secret}=")))
    r = _config(docker_compose, env, "-q")
    assert r.returncode != 0 and secret in r.stderr, r.stderr


def test_least_privilege(compose_config: dict[str, Any]) -> None:
    s = compose_config["services"]
    for name in APPS:
        svc = s[name]
        assert svc["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in svc["security_opt"], name
        assert svc["read_only"] is True and "/tmp" in svc["tmpfs"], name
        assert "privileged" not in svc and "cap_add" not in svc, name
    # published ports only on the host's loopback
    for name, svc in s.items():
        for port in svc.get("ports", []):
            published = port if isinstance(port, str) else f"{port['host_ip']}:{port['published']}"
            assert published.startswith("127.0.0.1:"), (name, port)


def test_watchers_get_read_only_host_access(compose_config: dict[str, Any]) -> None:
    w = compose_config["services"]["watchers"]
    assert w["pid"] == "host"
    mounts = {v.split(":")[1]: v.split(":")[2] for v in w["volumes"]}
    assert mounts.pop("/data") == "rw"  # the spool is the only writable place
    assert set(mounts) == {"/var/log/journal", "/run/log/journal", "/run/systemd",
                           "/run/dbus/system_bus_socket", "/host/etc"}
    assert set(mounts.values()) == {"ro"}
    assert w["environment"]["TR_WATCHERS_FILESYSTEM__PATHS"] == '["/host/etc/nixos","/host/etc/systemd"]'


def test_state_volumes(compose_config: dict[str, Any]) -> None:
    s = compose_config["services"]
    assert "memory-state:/data:rw" in s["indexer"]["volumes"]
    # the recall API writes only its own volume (the action ledger), reads the indexer's
    assert "recall-state:/data:rw" in s["recall-api"]["volumes"]
    assert "memory-state:/data/index:ro" in s["recall-api"]["volumes"]
    assert s["recall-api"]["environment"]["TR_RECALL_MEMORY_DIR"] == "/data/index/memory"
    # the question's model: the embedder's file, wherever the embedder's comes from
    assert "models:/data/models:ro" in s["recall-api"]["volumes"]
    assert (s["recall-api"]["environment"]["TR_EMBEDDER_MODEL_PATH"]
            == s["embedder-cpu"]["environment"]["TR_EMBEDDER_MODEL_PATH"]
            == "/opt/totalrecall/models/all-MiniLM-L6-v2.q8_0.gguf")
    for name in APPS:
        assert s[name]["environment"]["TOTALRECALL_HOME"] == "/data", name
    for name in ("embedder", "embedder-cpu"):  # its cache and backfill journal outlive it
        assert "embedder-state:/data:rw" in s[name]["volumes"], name
    assert set(compose_config["volumes"]) == {"nats-data", *(f"{n}-data" for n in NODES),
                                              "pg-data", "memory-state", "models",
                                              "recall-state",
                                              "embedder-state", "watchers-spool",
                                              "prometheus-data", "grafana-data"}


def test_the_cluster_profile_runs_three_nats_nodes(compose_config: dict[str, Any]) -> None:
    s = compose_config["services"]
    ports = set()
    for name in NODES:
        node = s[name]
        assert node["profiles"] == ["cluster"] and node["image"] == s["nats"]["image"]
        assert node["command"] == ["-c", "/etc/nats/node.conf"]
        assert "/healthz" in " ".join(node["healthcheck"]["test"])
        env = node["environment"]
        assert env["NATS_SERVER_NAME"] == f'"{name}"'
        # quoted for nats-server, and from .env (never a default)
        assert env["NATS_PASSWORD"] == '"change-me-nats"' == env["NATS_ROUTE_PASSWORD"]
        assert env["NATS_ROUTES"] == "[" + ", ".join(
            f'"nats-route://route:change-me-nats@{n}:6222"' for n in NODES) + "]"
        mounts = node["volumes"]
        assert any(str(m).startswith(f"{REPO}/deploy/nats/cluster:/etc/nats:ro") for m in mounts)
        assert f"{name}-data:/data:rw" in mounts or f"{name}-data:/data" in mounts
        (port,) = node["ports"]
        published = port if isinstance(port, str) else f"{port['host_ip']}:{port['published']}"
        assert published.startswith("127.0.0.1:"), (name, port)
        ports.add(published)
    assert len(ports) == 3
    # the services keep the single server and one replica unless .env says otherwise
    assert s["indexer"]["environment"]["TR_INDEXER_NATS_URL"].endswith("@nats:4222")
    for name, prefix in (("embedder", "TR_EMBEDDER"), ("indexer", "TR_INDEXER"),
                         ("recall-api", "TR_RECALL"), ("watchers", "TR_WATCHERS")):
        assert s[name]["environment"][f"{prefix}_NATS_REPLICAS"] == "1", name


def test_the_services_can_be_pointed_at_the_cluster(docker_compose: str, env_example: Path,
                                                    tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text(env_example.read_text() + "NATS_ADDRESS=nats-1:4222\nTR_NATS_REPLICAS=3\n")
    r = _config(docker_compose, env, env={"COMPOSE_PROFILES": "cpu,cluster"})
    assert r.returncode == 0, r.stderr
    s = yaml.safe_load(r.stdout)["services"]
    assert s["embedder-cpu"]["environment"]["TR_EMBEDDER_NATS_URL"].endswith("@nats-1:4222")
    assert s["watchers"]["environment"]["TR_WATCHERS_NATS_REPLICAS"] == "3"
