"""Session-wide real infrastructure for the tests: nats-server, Postgres, the embedding model.

Integration and end-to-end tests run against these real servers (started once per session in a
temporary directory); each test gets its own subjects/streams (`topology`) and database (`pg_dsn`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from totalrecall.infra import NatsServer, PostgresServer, free_port, free_ports
from totalrecall.paths import default_model_path
from totalrecall_schema import Topology


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for marker in ("unit", "integration", "e2e", "fleet"):
            if marker in parts:
                item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(scope="session")
def infra_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("infra")


@pytest.fixture(scope="session")
def nats_server(infra_dir: Path) -> Iterator[NatsServer]:
    port, monitor_port = free_ports(2)
    server = NatsServer(infra_dir / "nats", port=port, monitor_port=monitor_port)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


@pytest.fixture(scope="session")
def pg_server(infra_dir: Path) -> Iterator[PostgresServer]:
    server = PostgresServer(infra_dir / "pg", port=free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pg_server_dsn(pg_server: PostgresServer) -> str:
    return pg_server.dsn("postgres")


@pytest.fixture
def pg_dsn(pg_server: PostgresServer) -> str:
    """A fresh, empty database for this test."""
    return pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def topology(request: pytest.FixtureRequest) -> Topology:
    """Subjects and streams of this test alone."""
    return Topology.for_test(uuid.uuid4().hex[:10])


def pytest_addoption(parser: pytest.Parser) -> None:
    # Here, not in tests/chaos/conftest.py: options must be known before a plain `pytest`
    # collects that folder.
    parser.addoption("--chaos-full", action="store_true", dest="chaos_full",
                     help="run the full chaos rows (an hour or more; `make chaos`) and write "
                          "their committed results")


@pytest.fixture
def tr_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TOTALRECALL_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def model_path() -> Path:
    path = Path(os.environ.get("TR_TEST_MODEL_PATH", str(default_model_path())))
    if not path.exists():
        pytest.fail(f"embedding model missing at {path}: run `make bootstrap` (builds it once)")
    return path
