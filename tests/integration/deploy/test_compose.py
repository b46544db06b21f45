"""docker-compose.yml validated offline with docker-compose 1.29 (no Docker engine here)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def compose_config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    dc = subprocess.run([str(REPO / "scripts/compose-venv.sh")], capture_output=True, text=True,
                        check=True, timeout=900).stdout.strip().splitlines()[-1]
    env_file = tmp_path_factory.mktemp("compose") / ".env"
    shutil.copy(REPO / ".env.example", env_file)
    r = subprocess.run([dc, "--env-file", str(env_file), "-f", str(REPO / "docker-compose.yml"),
                        "config"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    return dict(yaml.safe_load(r.stdout))


def test_every_service_is_there_with_healthchecks(compose_config: dict[str, Any]) -> None:
    services = compose_config["services"]
    assert set(services) == {"nats", "postgres", "embedder", "indexer", "recall-api", "watchers",
                             "prometheus", "grafana"}
    for name in ("nats", "postgres", "embedder", "indexer", "recall-api", "watchers"):
        assert "healthcheck" in services[name], name
    for name in ("embedder", "indexer", "recall-api", "watchers"):
        assert services[name]["build"]["dockerfile"] == f"services/{name}/Dockerfile"
        assert (REPO / "services" / name / "Dockerfile").exists()


def test_dependency_order_waits_for_health(compose_config: dict[str, Any]) -> None:
    api = compose_config["services"]["recall-api"]["depends_on"]
    assert {k: v["condition"] for k, v in api.items()} == {
        "nats": "service_healthy", "postgres": "service_healthy", "indexer": "service_healthy",
        "embedder": "service_healthy"}


def test_embedder_reserves_the_gpu(compose_config: dict[str, Any]) -> None:
    devices = compose_config["services"]["embedder"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    cpu = yaml.load((REPO / "docker-compose.cpu.yml").read_text(), Loader=_ResetLoader)
    assert cpu["services"]["embedder"]["deploy"] == "RESET"


def test_credentials_come_from_the_environment(compose_config: dict[str, Any]) -> None:
    s = compose_config["services"]
    assert s["postgres"]["environment"]["POSTGRES_PASSWORD"] == "change-me-postgres"
    assert "change-me-nats" in s["indexer"]["environment"]["TR_INDEXER_NATS_URL"]
    assert s["recall-api"]["environment"]["TR_RECALL_API_TOKEN"] == "change-me-api-token"
    text = (REPO / "docker-compose.yml").read_text()
    assert ":?set POSTGRES_PASSWORD" in text and ":?set NATS_PASSWORD" in text  # no defaults


def test_watchers_get_host_access_and_least_privilege(compose_config: dict[str, Any]) -> None:
    w = compose_config["services"]["watchers"]
    assert w["pid"] == "host" and w["read_only"] is True and w["cap_drop"] == ["ALL"]
    mounts = {v.split(":")[1]: v.split(":")[2] for v in w["volumes"]}
    assert mounts["/var/log/journal"] == "ro" and mounts["/run/systemd"] == "ro"
    assert mounts["/host/etc"] == "ro" and mounts["/data"] == "rw"  # only the spool is writable


def test_missing_secret_is_refused(tmp_path: Path) -> None:
    dc = subprocess.run([str(REPO / "scripts/compose-venv.sh")], capture_output=True, text=True,
                        check=True).stdout.strip().splitlines()[-1]
    env = tmp_path / ".env"
    env.write_text("NATS_USER=u\nNATS_PASSWORD=p\n")
    r = subprocess.run([dc, "--env-file", str(env), "-f", str(REPO / "docker-compose.yml"),
                        "config", "-q"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode != 0 and "POSTGRES_PASSWORD" in r.stderr


class _ResetLoader(yaml.SafeLoader):
    pass


_ResetLoader.add_constructor("!reset", lambda loader, node: "RESET")
