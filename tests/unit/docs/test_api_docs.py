"""`docs/api.md` is the recall API as its code defines it (regenerate: scripts/api_docs.py)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def test_docs_api_md_matches_the_code(script: Callable[[str], ModuleType]) -> None:
    assert script("api_docs").main(["--check"]) == 0, "run: python scripts/api_docs.py"


def test_every_endpoint_is_listed(script: Callable[[str], ModuleType]) -> None:
    text = script("api_docs").current()
    for path in ("/memory/recall", "/memory/ingest", "/memory/forget", "/memory/alerts",
                 "/memory/export", "/memory/ledger", "/memory/supersede"):
        assert f"`{path}`" in text
