"""The CLI's shape: every verb lives under `totalrecall/commands/`, and the modules import each
other without a cycle.

- A cycle (counting imports inside functions, and the verbs `main` loads by name) makes the
  import order matter: a verb that works alone can break when another loads first.
- A verb module is one that defines a command line: it registers subparsers (`register(sub)`,
  `add_parser`) or builds its own `ArgumentParser`. Those live under `commands/` (one module, or
  a package when a verb needs several, as `commands/rebuild/`), and everything `main` dispatches
  to is one of them; the rest (supervisor, status, model_build, infra/, importers/) is the work
  they call, with no command line of its own. `main` itself, the dispatcher, builds the top one.
- No module over 450 lines, as in the services (`commands/rebuild/` is one verb in four modules).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "cli" / "totalrecall"
COMMANDS = "totalrecall.commands"
DISPATCHER = "totalrecall.main"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, tree: ast.Module, modules: set[str], is_package: bool) -> set[str]:
    """The package's modules `name` imports, anywhere in it (`from . import x` names the module
    x; `from . import NAME` the package itself, an edge even from inside it: the package's
    `__init__` must have run up to NAME)."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] \
                if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in modules else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return (found & modules) - {name}


def dispatched() -> dict[str, str]:
    """The modules `main` hands verbs to, by verb (or by module for those registering several):
    the registered modules and the passthrough verbs (imported by name when they run, so no
    import statement shows them)."""
    from totalrecall.commands import MODULES
    from totalrecall.commands.stack import PASSTHROUGH

    out = {m.__name__.rpartition(".")[2]: m.__name__ for m in MODULES}
    for verb, (_help, target) in PASSTHROUGH.items():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(f"totalrecall.{module}"), function)), target
        out[verb] = f"totalrecall.{module}"
    return out


def graph() -> dict[str, set[str]]:
    trees = sources()
    modules = set(trees)
    packages = {module_name(p) for p in PACKAGE.rglob("__init__.py")}
    edges = {name: imports(name, tree, modules, name in packages) for name, tree in trees.items()}
    stack = "totalrecall.commands.stack"  # where the passthrough verbs are loaded by name
    edges[stack] |= set(dispatched().values()) - {stack}
    return edges


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def defines_a_command_line(tree: ast.Module) -> bool:
    """Registers subparsers or builds a parser: `def register(…)` at the top, or a call of
    `ArgumentParser`, `add_parser` or `add_subparsers`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if called in ("ArgumentParser", "add_parser", "add_subparsers"):
                return True
    return any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body)


def under_commands(name: str) -> bool:
    return name == COMMANDS or name.startswith(COMMANDS + ".")


# --- import cycles -----------------------------------------------------------------------------
def test_the_cli_has_no_import_cycle() -> None:
    edges = graph()
    assert {DISPATCHER, COMMANDS, "totalrecall.supervisor"} <= set(edges)
    # The edges are found: module level, inside a function, and the verbs loaded by name.
    assert COMMANDS in edges[DISPATCHER]
    assert "totalrecall.status" in edges["totalrecall.supervisor"]
    assert "totalrecall.commands.rebuild" in edges["totalrecall.commands.stack"]
    cycle = find_cycle(edges)
    assert cycle is None, " → ".join(cycle or [])


def test_a_cycle_is_found() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_importing_a_name_from_the_own_package_is_an_edge() -> None:
    modules = {"p", "p.a", "p.b"}
    child = ast.parse("from . import HELPER\nfrom . import b\n\ndef f():\n    from .. import p\n")
    assert imports("p.a", child, modules, is_package=False) == {"p", "p.b"}


# --- verbs under commands/ ---------------------------------------------------------------------
def test_every_verb_main_dispatches_to_lives_under_commands() -> None:
    verbs = dispatched()
    assert {"doctor", "rebuild", "model", "import"} <= set(verbs)
    outside = {verb: module for verb, module in verbs.items() if not under_commands(module)}
    assert not outside, f"verbs outside {COMMANDS}: {outside}"


def test_no_module_outside_commands_defines_a_command_line() -> None:
    trees = sources()
    verbs = {name for name, tree in trees.items() if defines_a_command_line(tree)}
    assert {"totalrecall.commands.rebuild", "totalrecall.commands.doctor"} <= verbs
    outside = sorted(v for v in verbs - {DISPATCHER} if not under_commands(v))
    assert not outside, (f"{outside} define a command line: a verb's code goes under "
                         f"cli/totalrecall/commands/, the work it calls stays without one")


def test_every_module_under_commands_is_a_verb_or_shared_by_them() -> None:
    """`commands/<verb>.py` or `commands/<verb>/` is dispatched to; `_common` is what they share."""
    tops = {p.stem for p in (PACKAGE / "commands").glob("*.py") if p.stem != "__init__"}
    tops |= {p.parent.name for p in (PACKAGE / "commands").glob("*/__init__.py")}
    registered = {m.removeprefix(COMMANDS + ".") for m in dispatched().values()}
    assert sorted(t for t in tops - registered if not t.startswith("_")) == []


def test_a_command_line_is_recognised() -> None:
    assert defines_a_command_line(ast.parse("import argparse\np = argparse.ArgumentParser()"))
    assert defines_a_command_line(ast.parse("def register(sub):\n    pass\n"))
    assert defines_a_command_line(ast.parse("def f(sub):\n    sub.add_parser('x')\n"))
    assert not defines_a_command_line(ast.parse("def run(args):\n    return args.json\n"))


def test_no_module_of_the_cli_is_over_450_lines() -> None:
    """As for the services: a module that grows past it is split along its seams."""
    long = {module_name(p): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 450}
    assert not long, long
