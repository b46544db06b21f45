"""A PostgreSQL tool that fails says why: its own words, not only its exit status."""

from __future__ import annotations

from pathlib import Path

import pytest
from totalrecall.infra.postgres import PostgresServer


def test_a_failing_tool_raises_with_what_it_printed(tmp_path: Path) -> None:
    server = PostgresServer(tmp_path / "pg")
    with pytest.raises(RuntimeError, match=r"sh exited with 3.*could not access directory"):
        server._cmd("/bin/sh", "-c", "echo 'initdb: error: could not access directory' >&2; exit 3")
    server._cmd("/bin/sh", "-c", "exit 0")  # success says nothing
