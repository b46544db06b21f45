"""Tests that need this process to run on a known host (`totalrecall_schema.host`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from totalrecall_schema import host as host_mod


@contextlib.contextmanager
def local_host_as(monkeypatch: pytest.MonkeyPatch, hostname: str, machine_id: str
                  ) -> Iterator[None]:
    """Within: the local host is `hostname` with `machine_id` (read again on leaving)."""
    monkeypatch.setenv("TOTALRECALL_HOSTNAME", hostname)
    monkeypatch.setenv("TOTALRECALL_MACHINE_ID", machine_id)
    host_mod._resolve.cache_clear()
    try:
        yield
    finally:
        host_mod._resolve.cache_clear()
