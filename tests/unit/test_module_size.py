"""No module of a service is over 450 lines: a module that grows past it is split along its seams
(docs/dev/conventions.md), so that each one can be read whole."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 450


def service_modules() -> list[Path]:
    return sorted((ROOT / "services").glob("*/totalrecall_*/**/*.py"))


def test_no_service_module_is_over_the_limit() -> None:
    modules = service_modules()
    assert len(modules) > 100  # the glob finds every service's package
    assert {p.parts[-3] for p in modules if p.parent.name == "core"} >= {
        "totalrecall_indexer", "totalrecall_recall_api", "totalrecall_watchers"}
    over = {str(p.relative_to(ROOT)): n for p in modules
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not over, f"over {MAX_LINES} lines: {over}; split each along its seams"
