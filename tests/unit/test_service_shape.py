"""Every service has the same shape (docs/dev/conventions.md), and its core/ does no I/O.

Per service (`SHAPES`, one entry each; the watchers' core/ is also held to a stricter test of
the calls it makes, `tests/unit/watchers/test_watchers_shape.py`):

* the standard modules exist under their standard names: `settings.py`, `app.py`,
  `metrics.py`, `container.py` (the object graph), `__main__.py`, `handlers` and `lifecycle`
  (each a module or a package), and the packages `core/` (pure) and `adapters/` (I/O);
* nothing else stands at the top level but what the service declares: its feature folders, its
  ports, a public entry point. A new module goes into one of those, not beside them;
* no module of `core/` imports, at run time, a library whose job is I/O (`IO_MODULES`) or a part
  of the service that does I/O or wires it (`adapters/`, the container, the lifecycle, the app,
  the handlers, the feature folders). An import under `if TYPE_CHECKING:` is not run: core/ may
  name an adapter's type to annotate what it is handed.

Read from the source: nothing is imported or run.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Modules every service has, as `<name>.py`.
MODULES = frozenset({"__init__", "__main__", "settings", "app", "metrics", "container"})
#: Parts every service has, as a module `<name>.py` or a package `<name>/`.
MODULE_OR_PACKAGE = frozenset({"handlers", "lifecycle"})
#: Packages every service has.
PACKAGES = frozenset({"core", "adapters"})


@dataclass(frozen=True)
class Shape:
    package: Path
    #: What else may stand at the top level, as "<name>.py" or "<name>/", and why.
    extra: dict[str, str] = field(default_factory=dict)


SHAPES: dict[str, Shape] = {
    "embedder": Shape(ROOT / "services/embedder/totalrecall_embedder"),
    "indexer": Shape(ROOT / "services/indexer/totalrecall_indexer", {
        "api.py": "the declared entry point of the CLI, the evals and the benchmarks",
    }),
    "recall-api": Shape(ROOT / "services/recall-api/totalrecall_recall_api", {
        "ports.py": "the protocols the adapters implement and core/ and the features are handed",
        "recall/": "the search service, its stages and what bounds and times them",
        "alerts/": "the alert monitor (its rules are core/alerts.py)",
        "sessions/": "session bundles and summaries, conclusions, learned patterns, the ledger",
        "api.py": "the declared entry point of the evals",
    }),
    "watchers": Shape(ROOT / "services/watchers/totalrecall_watchers"),
}

#: Libraries (or their parents) whose job is I/O: network, processes, files, databases, devices.
IO_MODULES = frozenset({
    "asyncpg", "nats", "httpx", "requests", "aiohttp", "urllib.request", "http.client",
    "subprocess", "asyncio.subprocess", "multiprocessing", "socket", "select", "selectors",
    "ssl", "sqlite3", "mmap", "shutil", "tempfile", "fcntl", "ctypes", "psutil", "zvec",
    "llama_cpp", "faststream", "uvicorn", "fastapi", "starlette",
})


def top_level(package: Path) -> set[str]:
    """The package's modules ("x.py") and sub-packages ("x/": a folder holding Python)."""
    found = {p.name for p in package.glob("*.py")}
    found |= {f"{p.name}/" for p in package.iterdir()
              if p.is_dir() and p.name != "__pycache__" and any(p.rglob("*.py"))}
    return found


def shape_problems(package: Path, extra: dict[str, str]) -> list[str]:
    present = top_level(package)
    problems = [f"missing {m}.py" for m in sorted(MODULES) if f"{m}.py" not in present]
    problems += [f"missing {p}/" for p in sorted(PACKAGES) if f"{p}/" not in present]
    problems += [f"missing {m}.py or {m}/" for m in sorted(MODULE_OR_PACKAGE)
                 if not {f"{m}.py", f"{m}/"} & present]
    allowed = ({f"{m}.py" for m in MODULES | MODULE_OR_PACKAGE}
               | {f"{p}/" for p in PACKAGES | MODULE_OR_PACKAGE} | set(extra))
    problems += [f"{name} stands outside the service's shape: move it into core/ (pure), "
                 "adapters/ (I/O) or a feature folder, or declare it" for name in
                 sorted(present - allowed)]
    problems += [f"{m} is both a module and a package" for m in sorted(MODULE_OR_PACKAGE)
                 if {f"{m}.py", f"{m}/"} <= present]
    return problems


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def run_time_imports(source: str) -> list[tuple[int, str]]:
    """(line, name) of each import a module runs, nested ones too: `import a.b` → "a.b";
    `from a.b import c` → "a.b" and "a.b.c"; `from ..x import y` → "..x";
    `from .. import y` → "..y"."""
    tree = ast.parse(source)
    skipped = _type_checking_only(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            dots, module = "." * node.level, node.module or ""
            if not module:  # `from .. import container`: the names are modules
                found += [(node.lineno, dots + a.name) for a in node.names]
                continue
            found.append((node.lineno, dots + module))
            if not dots:  # `from asyncio import subprocess`: a name may be a module
                found += [(node.lineno, f"{module}.{a.name}") for a in node.names]
    return found


def core_violations(source: str, package_name: str, io_parts: frozenset[str]) -> list[str]:
    """What a module of core/ (`source`) imports that does I/O, as "line: name".

    `io_parts`: the service's own top-level parts core/ must not reach (relative names)."""
    out = []
    for line, name in run_time_imports(source):
        if name.startswith(".."):  # out of core/, into the service
            part = name.lstrip(".").split(".")[0]
            bad = part in io_parts
        elif name.startswith(package_name + "."):
            bad = name.split(".")[1] in io_parts
        else:
            bad = any(name == m or name.startswith(m + ".") for m in IO_MODULES)
        if bad and not (out and out[-1].startswith(f"{line}: ")):  # once a statement
            out.append(f"{line}: {name}")
    return out


def io_parts_of(shape: Shape) -> frozenset[str]:
    """The service's parts that do I/O or wire it: all but core/ and the plain data modules."""
    parts = {name.removesuffix(".py").removesuffix("/") for name in top_level(shape.package)}
    return frozenset(parts - {"core", "settings", "metrics", "ports", "__init__"})


@pytest.mark.parametrize("service", sorted(SHAPES))
def test_the_service_has_the_standard_shape_and_nothing_else(service: str) -> None:
    shape = SHAPES[service]
    assert shape.package.is_dir(), shape.package
    assert shape_problems(shape.package, shape.extra) == []


@pytest.mark.parametrize("service", sorted(SHAPES))
def test_core_imports_no_io(service: str) -> None:
    shape = SHAPES[service]
    modules = sorted((shape.package / "core").rglob("*.py"))
    assert len(modules) > 3, "the glob found core/"
    io_parts = io_parts_of(shape)
    assert "adapters" in io_parts and "container" in io_parts
    found = {str(p.relative_to(shape.package)): v for p in modules
             if (v := core_violations(p.read_text(encoding="utf-8"), shape.package.name,
                                      io_parts))}
    assert found == {}, "core/ does I/O: move it to adapters/ and hand it in"


def test_the_shape_check_sees_what_is_missing_and_what_is_extra(tmp_path: Path) -> None:
    for name in ("__init__", "__main__", "settings", "app", "metrics", "container", "handlers",
                 "helpers"):
        (tmp_path / f"{name}.py").write_text("")
    for package in ("core", "adapters", "lifecycle", "feature", "static"):
        (tmp_path / package).mkdir()
    for package in ("core", "adapters", "lifecycle", "feature"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "lifecycle.py").write_text("")
    (tmp_path / "static" / "page.js").write_text("")  # data, not Python: not a part
    problems = shape_problems(tmp_path, {"feature/": "declared"})
    assert problems == [
        "helpers.py stands outside the service's shape: move it into core/ (pure), adapters/ "
        "(I/O) or a feature folder, or declare it",
        "lifecycle is both a module and a package"]
    (tmp_path / "container.py").unlink()
    assert shape_problems(tmp_path, {"feature/": "declared", "helpers.py": "declared"}) == [
        "missing container.py", "lifecycle is both a module and a package"]


def test_the_core_check_catches_io_and_leaves_pure_code_alone() -> None:
    bad = ("import asyncpg\n"
           "import nats.js.errors\n"
           "from asyncio.subprocess import PIPE\n"
           "from zvec import Doc\n"
           "from ..adapters.pgstore import PgStore\n"
           "from .. import container\n"
           "from totalrecall_x.lifecycle import loops\n"
           "def f():\n"
           "    import llama_cpp\n")
    found = [v.split(": ", 1)[1] for v in core_violations(bad, "totalrecall_x",
                                                             frozenset({"adapters", "container",
                                                                        "lifecycle"}))]
    for name in ("asyncpg", "nats.js.errors", "asyncio.subprocess", "zvec",
                 "..adapters.pgstore", "..container", "totalrecall_x.lifecycle", "llama_cpp"):
        assert name in found, (name, found)
    pure = ("from __future__ import annotations\n"
            "import asyncio\nimport re\nfrom pathlib import Path\nfrom typing import TYPE_CHECKING\n"
            "from totalrecall_schema import MemoryEvent\n"
            "from .search import TIERS\nfrom ..settings import Settings\nfrom ..metrics import M\n"
            "if TYPE_CHECKING:\n"
            "    from ..adapters.pgstore import PgStore\n")
    assert core_violations(pure, "totalrecall_x", frozenset({"adapters"})) == []
