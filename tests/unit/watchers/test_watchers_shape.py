"""The watchers service has the shape of the others, and its core/ stays pure.

What is checked (statically, on the source; nothing is imported or run):

* the standard modules exist (`settings.py`, `app.py`, `handlers.py`, `metrics.py`,
  `container.py`, `lifecycle.py`, `__main__.py`, `core/`, `adapters/`) and there is no other
  top-level module or package: a new piece of I/O goes to `adapters/`, a new decision to `core/`;
* no module of `core/` does I/O, as far as its source shows:
  - it imports no module whose job is I/O or background work (`subprocess`, `socket`,
    `psutil`, `select`, `ctypes`, `shutil`, `glob`, `pwd`, `threading`, `watchfiles`, `nats`,
    `httpx`, `asyncio.subprocess`, …), and nothing of `adapters/` or of the wiring
    (`container`, `lifecycle`, `app`);
  - it calls no builtin `open`, no `os` function but the pure path ones (`os.path.basename`,
    `join`, `normpath`, …: not `os.stat`, `os.readlink`, `os.walk`, `os.path.exists`,
    `os.geteuid`, `os.environ`), no `time.sleep`, no asyncio subprocess or connection;
  - it calls no method whose name is a `pathlib.Path` read or write (`read_text`, `iterdir`,
    `exists`, `is_dir`, `stat`, `open`, `readlink`, `mkdir`, `unlink`, …). A method of that
    name on another object is flagged too: in core/ that is a name to choose differently.

What it cannot see: I/O reached through an object handed in (that is the point: adapters are
handed to core), or through a name bound in a way other than a plain import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import totalrecall_watchers

PACKAGE = Path(totalrecall_watchers.__file__).resolve().parent

STANDARD_MODULES = {"__init__.py", "__main__.py", "settings.py", "app.py", "handlers.py",
                    "metrics.py", "container.py", "lifecycle.py"}
STANDARD_PACKAGES = {"core", "adapters"}

#: Modules (or their parents) whose job is I/O or background work.
IO_MODULES = {"subprocess", "socket", "psutil", "select", "selectors", "ctypes", "fcntl", "pwd",
              "grp", "glob", "shutil", "threading", "multiprocessing", "watchfiles", "nats",
              "httpx", "requests", "urllib.request", "http.client", "sqlite3", "mmap",
              "asyncio.subprocess", "importlib.metadata", "tempfile", "uvicorn"}
#: The service's own modules core/ must not reach (relative to the package).
WIRING_MODULES = {"adapters", "container", "lifecycle", "app", "handlers"}
#: `os` names that do no I/O (os.path's string functions, constants).
PURE_OS = {"path", "sep", "altsep", "extsep", "pathsep", "linesep", "curdir", "pardir", "fspath",
           "PathLike", "name"}
PURE_OS_PATH = {"basename", "dirname", "join", "normpath", "split", "splitext", "splitdrive",
                "commonpath", "commonprefix", "isabs", "relpath", "sep", "normcase"}
#: Method names of pathlib's reads and writes; asyncio's subprocesses and connections.
IO_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "iterdir", "glob", "rglob",
              "exists", "is_dir", "is_file", "is_symlink", "is_mount", "is_socket", "is_fifo",
              "is_block_device", "is_char_device", "stat", "lstat", "readlink", "open", "mkdir",
              "rmdir", "unlink", "touch", "chmod", "symlink_to", "hardlink_to", "samefile",
              "expanduser", "create_subprocess_exec",
              "create_subprocess_shell", "open_connection", "open_unix_connection",
              "start_server", "to_thread"}


def _imported(node: ast.AST, module: str) -> list[str]:
    """The absolute or package-relative names an import statement brings in."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # `from ..adapters.x import y` → "..adapters.x"; `from .. import app`
            prefix = "." * node.level
            return [prefix + base] if base else [prefix + a.name for a in node.names]
        return [base] + [f"{base}.{a.name}" for a in node.names]
    return []


def _io_import(name: str) -> bool:
    if name.startswith(".."):  # out of core/: only the package's own pure modules
        first = name.lstrip(".").split(".")[0]
        return first in WIRING_MODULES
    if name.startswith("totalrecall_watchers."):
        return name.split(".")[1] in WIRING_MODULES
    return any(name == m or name.startswith(m + ".") for m in IO_MODULES)


def violations(source: str, module: str = "core/x.py") -> list[str]:
    """What in `source` (a module of core/) does I/O, as `line: what`, by line."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        for name in _imported(node, module):
            if _io_import(name):
                out.append((node.lineno, f"imports {name}"))
        if not isinstance(node, ast.Call):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "os" and node.attr not in PURE_OS:
                out.append((node.lineno, f"os.{node.attr}"))
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            out.append((node.lineno, "open()"))
        elif isinstance(f, ast.Attribute):
            owner = f.value
            if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) \
                    and owner.value.id == "os" and owner.attr == "path" \
                    and f.attr not in PURE_OS_PATH:
                out.append((node.lineno, f"os.path.{f.attr}()"))
            elif isinstance(owner, ast.Name) and owner.id == "time" and f.attr == "sleep":
                out.append((node.lineno, "time.sleep()"))
            elif f.attr in IO_METHODS:
                out.append((node.lineno, f".{f.attr}()"))
    return [f"{n}: {what}" for n, what in sorted(out)]


def test_the_standard_modules_exist_and_no_others() -> None:
    present = {p.name for p in PACKAGE.iterdir() if p.suffix == ".py"}
    packages = {p.name for p in PACKAGE.iterdir()
                if p.is_dir() and (p / "__init__.py").is_file()}
    assert present >= STANDARD_MODULES, f"missing: {sorted(STANDARD_MODULES - present)}"
    assert present <= STANDARD_MODULES, (
        f"top-level modules outside the standard set: {sorted(present - STANDARD_MODULES)}; "
        "I/O goes to adapters/, decisions to core/")
    assert packages == STANDARD_PACKAGES, f"packages: {sorted(packages)}"


def test_core_does_no_io() -> None:
    modules = sorted((PACKAGE / "core").glob("*.py"))
    assert len(modules) > 10  # the glob finds core/
    found = {p.name: v for p in modules if (v := violations(p.read_text(encoding="utf-8")))}
    assert not found, f"I/O in core/ (move it to adapters/ and hand it in): {found}"


def test_the_check_catches_io() -> None:
    bad = ("import subprocess\n"
           "import psutil.tests\n"
           "from asyncio import subprocess as sp\n"
           "from asyncio.subprocess import PIPE\n"
           "from ..adapters.processes import run_command\n"
           "from .. import container\n"
           "from totalrecall_watchers.adapters import users\n"
           "import os\n"
           "def f(p):\n"
           "    open(p)\n"
           "    p.read_text()\n"
           "    os.stat(p)\n"
           "    os.path.exists(p)\n"
           "    x = os.environ\n"
           "    time.sleep(1)\n"
           "    asyncio.create_subprocess_exec('ls')\n")
    found = [v.split(": ", 1)[1] for v in violations(bad)]
    expected_fragments = ["imports subprocess", "imports psutil.tests", "imports asyncio.",
                          "imports asyncio.subprocess", "imports ..adapters.processes",
                          "imports ..container", "imports totalrecall_watchers.adapters",
                          "open()", ".read_text()", "os.stat", "os.path.exists()",
                          "os.environ", "time.sleep()", ".create_subprocess_exec()"]
    for fragment in expected_fragments:
        assert any(fragment in v for v in found), (fragment, found)


def test_the_check_leaves_pure_code_alone() -> None:
    pure = ("from __future__ import annotations\n"
            "import os\nimport re\nimport json\nfrom pathlib import Path\n"
            "from totalrecall_schema import MemoryEvent\n"
            "from .base import Watcher\nfrom ..settings import StorageSettings\n"
            "def f(argv: list[str], p: Path) -> str:\n"
            "    return os.path.basename(argv[0]) + os.sep + p.name + str(p / 'x')\n")
    assert violations(pure) == []
