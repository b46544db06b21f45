"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from totalrecall_schema import Topology, ensure_streams


@pytest.fixture
async def nc(nats_url: str, topology: Topology) -> AsyncIterator[Any]:
    """A NATS connection with this test's streams in place."""
    client = await nats.connect(nats_url)
    await ensure_streams(client.jetstream(), topology)
    yield client
    await client.close()
