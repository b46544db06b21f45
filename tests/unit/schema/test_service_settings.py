"""The settings every service shares: one base, each service's environment prefix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import Field
from pydantic_settings import SettingsConfigDict
from totalrecall_embedder.settings import Settings as EmbedderSettings
from totalrecall_indexer.settings import Settings as IndexerSettings
from totalrecall_schema import Topology
from totalrecall_schema.service_settings import ServiceSettings


class DemoSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TR_DEMO_", extra="ignore")

    http_port: int = 9999
    window_s: float = 5.0
    names: list[str] = Field(default_factory=lambda: ["a"])


@dataclass
class DemoConfig:
    window_s: float = 1.0
    names: tuple[str, ...] = ()
    not_a_setting: int = 7


def test_the_shared_fields_take_the_service_prefix(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("TOTALRECALL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TR_DEMO_NATS_URL", "nats://elsewhere:4222")
    monkeypatch.setenv("TR_DEMO_SUBJECT_PREFIX", "tdemo")
    monkeypatch.setenv("TR_OTHER_STREAM_PREFIX", "NOT_OURS")
    s = DemoSettings()
    assert s.nats_url == "nats://elsewhere:4222" and s.http_port == 9999
    assert s.home == tmp_path / "home"
    assert s.topology == Topology(prefix="tdemo", stream_prefix="MEMORY")
    monkeypatch.setenv("TR_DEMO_HOME", str(tmp_path / "own"))
    assert DemoSettings().home == tmp_path / "own"


def test_section_fills_a_core_config_from_the_same_names() -> None:
    s = DemoSettings(window_s=9.0)
    assert s.section(DemoConfig) == DemoConfig(window_s=9.0, names=["a"])  # type: ignore[arg-type]
    assert s.section(DemoConfig, names=("b",)).names == ("b",)


@pytest.mark.parametrize("cls, prefix, port", [(EmbedderSettings, "TR_EMBEDDER_", 8766),
                                               (IndexerSettings, "TR_INDEXER_", 8767)])
def test_the_workers_environment_names_did_not_change(
        cls: type[ServiceSettings], prefix: str, port: int, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("TOTALRECALL_HOME", str(tmp_path))
    assert cls().home == tmp_path and cls().http_port == port
    for name, value in {"NATS_URL": "nats://x:1", "SUBJECT_PREFIX": "p", "STREAM_PREFIX": "P",
                        "HTTP_HOST": "0.0.0.0", "HTTP_PORT": "1234",
                        "HOME": str(tmp_path / "h"), "FETCH_TIMEOUT_S": "0.5",
                        "ACK_WAIT_S": "9"}.items():
        monkeypatch.setenv(prefix + name, value)
    s = cls()
    assert (s.nats_url, s.topology, s.http_host, s.http_port, s.home) == (
        "nats://x:1", Topology("p", "P"), "0.0.0.0", 1234, tmp_path / "h")
    assert (s.fetch_timeout_s, s.ack_wait_s) == (0.5, 9.0)  # type: ignore[attr-defined]
