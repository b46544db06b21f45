"""Fixtures of the embedder integration tests: the embedder's settings for this test's subjects,
streams and home (the NATS connection `nc` is tests/integration/conftest.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from totalrecall_embedder.settings import Settings
from totalrecall_schema import Topology


@pytest.fixture
def settings(nats_url: str, topology: Topology, tr_home: Path, model_path: Path) -> Settings:
    return Settings(nats_url=nats_url, subject_prefix=topology.prefix,
                    stream_prefix=topology.stream_prefix, home=tr_home, model_path=model_path,
                    retry_delay_s=0.3, n_threads=1, query_n_threads=1)

