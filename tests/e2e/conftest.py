from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from stacklib import Api, launch_stack


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
          ) -> Iterator[Api]:
    """One stack for the whole e2e session, started exactly as `make run` starts it."""
    model = None if os.environ.get("TOTALRECALL_E2E_API") else request.getfixturevalue("model_path")
    with launch_stack(tmp_path_factory.mktemp("e2e-home"), model) as api:
        yield api
