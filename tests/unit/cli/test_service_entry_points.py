"""cli/, eval/ and bench/ use a service only through its declared public entry points.

A service's modules are its inside: they change with it. What code outside the services may
import of one is listed here, per service (`totalrecall_indexer.api` for the indexer,
`totalrecall_recall_api.api` for the recall API; the
embedder's model code is the shared `totalrecall_worker.llama_model`, so nothing of the embedder
itself). Running a service as a process (`python -m totalrecall_indexer`) is not an import and
is always allowed.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCANNED = ("cli", "eval", "bench")

#: Service package -> (its distribution, the modules code outside the services may import).
ALLOWED: dict[str, tuple[str, frozenset[str]]] = {
    "totalrecall_indexer": ("totalrecall-indexer", frozenset({"totalrecall_indexer.api"})),
    "totalrecall_embedder": ("totalrecall-embedder", frozenset()),
    "totalrecall_recall_api": ("totalrecall-recall-api", frozenset({"totalrecall_recall_api.api"})),
    "totalrecall_watchers": ("totalrecall-watchers", frozenset()),
}


def imported_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import in `source`: `import a.b`, `from a.b import c` (as
    `a.b`, and `a.b.c` when `c` may be a module), and `importlib.import_module("a.b")`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            if node.module in ALLOWED:  # `from pkg import module`
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.lineno, node.args[0].value))
    return found


def violations(source: str) -> list[tuple[int, str]]:
    out = []
    for line, module in imported_modules(source):
        service = module.split(".")[0]
        if service in ALLOWED and module != service and module not in ALLOWED[service][1]:
            out.append((line, module))
    return out


def _files() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py")
                  if ".venv" not in p.parts and "__pycache__" not in p.parts)


def test_cli_eval_and_bench_import_only_public_entry_points() -> None:
    bad = {f"{path.relative_to(ROOT)}:{line}": module for path in _files()
           for line, module in violations(path.read_text(encoding="utf-8"))}
    assert not bad, f"service internals imported (use the service's public entry point): {bad}"


def test_the_check_catches_an_internal_import() -> None:
    source = ("from totalrecall_indexer.settings import Settings\n"
              "import totalrecall_embedder.core.backend\n"
              "from totalrecall_indexer import rebuild\n"
              "importlib.import_module('totalrecall_watchers.lifecycle')\n"
              "from totalrecall_indexer.api import rebuild\n"
              "from totalrecall_schema.daily_log import parse_daily\n")
    assert [m for _, m in violations(source)] == [
        "totalrecall_indexer.settings", "totalrecall_embedder.core.backend",
        "totalrecall_indexer.rebuild", "totalrecall_watchers.lifecycle"]


def test_every_public_entry_point_exports_what_it_declares() -> None:
    for _, modules in ALLOWED.values():
        for name in modules:
            module = importlib.import_module(name)
            missing = [n for n in module.__all__ if not hasattr(module, n)]
            assert not missing, f"{name} declares {missing} but has them not"


def test_the_cli_declares_the_services_it_imports() -> None:
    project = tomllib.loads((ROOT / "cli/pyproject.toml").read_text())["project"]
    declared = {d.split("[")[0].split(">")[0].split("=")[0].strip()
                for d in [*project["dependencies"],
                          *(d for ds in project.get("optional-dependencies", {}).values()
                            for d in ds)]}
    used = {module.split(".")[0] for path in (ROOT / "cli").rglob("*.py")
            for _, module in imported_modules(path.read_text(encoding="utf-8"))}
    needed = {ALLOWED[s][0] for s in used if s in ALLOWED}
    needed |= {"totalrecall-worker"} if "totalrecall_worker" in used else set()
    assert needed <= declared, f"cli/pyproject.toml does not declare {needed - declared}"
