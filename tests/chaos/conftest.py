"""The chaos rows' pytest wiring.

Markers: `chaos` marks a full row (minutes each, `make chaos`); those are deselected unless the
run asks for them explicitly, with `--chaos-full` (or ``TR_CHAOS_FULL=1``). Everything else here
(the fast variants, marked `fast`) runs in the default `pytest` / `make test`. A full run sets
``TR_CHAOS_FULL=1``, so `report.record` writes the committed results, not the fast ones. The
mark expression is not read for this: `-m "not chaos"` names the marker too.

`chaos_stack` is one stack per module, started exactly as `make run` starts it, in the module's own
`TOTALRECALL_HOME` on its own free ports.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .stack import ChaosStack, chaos_stack_in


def full_run(config: pytest.Config) -> bool:
    """Asked for the full rows: `--chaos-full`, or ``TR_CHAOS_FULL=1``."""
    return bool(config.getoption("chaos_full", default=False)) \
        or os.environ.get("TR_CHAOS_FULL") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a full chaos row (make chaos; deselected otherwise)")
    config.addinivalue_line("markers", "fast: the fast variant of a chaos row (runs in make test)")
    if full_run(config):
        os.environ["TR_CHAOS_FULL"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if full_run(config):
        return
    full = [i for i in items if i.get_closest_marker("chaos") is not None]
    if full:
        items[:] = [i for i in items if i.get_closest_marker("chaos") is None]
        config.hook.pytest_deselected(items=full)


@pytest.fixture(scope="module")
def chaos_home(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    return tmp_path_factory.mktemp(f"chaos-{request.module.__name__.rsplit('.', 1)[-1]}")


@pytest.fixture(scope="module")
def chaos_stack(chaos_home: Path, model_path: Path) -> Iterator[ChaosStack]:
    """The whole stack for this module (`totalrecall run` on free ports, its own home)."""
    with chaos_stack_in(chaos_home, model_path) as stack:
        yield stack
