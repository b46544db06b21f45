"""`docs/api.md` is the recall API as its code defines it (regenerate: scripts/api_docs.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "api_docs.py"


def _module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("api_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_api_md_matches_the_code() -> None:
    assert _module().main(["--check"]) == 0, "run: python scripts/api_docs.py"


def test_every_endpoint_is_listed() -> None:
    text = _module().current()
    for path in ("/memory/recall", "/memory/ingest", "/memory/forget", "/memory/alerts",
                 "/memory/export", "/memory/ledger", "/memory/supersede"):
        assert f"`{path}`" in text
