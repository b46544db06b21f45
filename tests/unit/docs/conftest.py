"""The scripts that generate files from the code (`scripts/*.py`), loaded as modules."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


@pytest.fixture
def script() -> Callable[[str], ModuleType]:
    """`script("api_docs")`: scripts/api_docs.py as a module (its sibling imports resolved)."""

    def load(name: str) -> ModuleType:
        if str(SCRIPTS) not in sys.path:  # as `python scripts/<name>.py` has it
            sys.path.insert(0, str(SCRIPTS))
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
