"""The NixOS module's option names are the design's (docs/design.md §14), and the
names it had before are aliases (`mkRenamedOptionModule` / `mkChangedOptionModule`). There is no
nix binary here: the module is read with the tree-sitter Nix grammar and its option tree
rebuilt from the syntax (static `mkOption`s plus the generated polled watchers)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from deploy_common import DEPLOY

NIX = DEPLOY / "nixos" / "module.nix"
README = DEPLOY / "README.md"
PREFIX = ("services", "agentos", "memory")

#: The design's names (docs/design.md §14) that map to something this stack has. Not provided:
#: the embedding model *name* / quantization (a GGUF path instead), tiers.hot.maxVectors,
#: tiers.warm.quantize, tiers.cold.enabled, recall.autoInject / maxResults (the agent plugin's).
DESIGN_OPTIONS = {
    "enable", "stateDir", "embedding.model", "embedding.device", "embedding.batchSize",
    "tiers.hot.maxAge", "tiers.warm.maxAge", "recall.weights.vector", "recall.weights.bm25",
    "recall.weights.recency", "recall.recencyHalfLifeHours",
    "watchers.process.enable", "watchers.process.interval", "watchers.service.enable",
    "watchers.service.interval", "watchers.journal.enable", "watchers.network.enable",
    "watchers.filesystem.enable", "watchers.filesystem.watchPaths", "watchers.nixos.enable",
    "patterns.enable", "patterns.detectionInterval", "patterns.minObservations",
}
#: old name → (new name, how): the names of the module before it followed the design.
ALIASES = {
    "tiers.hot.retentionHours": ("tiers.hot.maxAge", "mkChangedOptionModule"),
    "tiers.warm.retentionDays": ("tiers.warm.maxAge", "mkChangedOptionModule"),
    "recall.halfLifeHours": ("recall.recencyHalfLifeHours", "mkRenamedOptionModule"),
    "watchers.services.enable": ("watchers.service.enable", "mkRenamedOptionModule"),
    "watchers.services.interval": ("watchers.service.interval", "mkRenamedOptionModule"),
    "watchers.filesystem.paths": ("watchers.filesystem.watchPaths", "mkRenamedOptionModule"),
}


@pytest.fixture(scope="module")
def tree() -> tuple[Any, bytes]:
    ts = pytest.importorskip("tree_sitter", reason="pip install tree-sitter tree-sitter-nix")
    tsn = pytest.importorskip("tree_sitter_nix", reason="pip install tree-sitter tree-sitter-nix")
    src = NIX.read_bytes()
    return ts.Parser(ts.Language(tsn.language())).parse(src).root_node, src


def text(node: Any, src: bytes) -> str:
    return src[node.start_byte:node.end_byte].decode()


def descendants(node: Any, kind: str) -> list[Any]:
    out = [node] if node.type == kind else []
    for c in node.children:
        out += descendants(c, kind)
    return out


def binding(root: Any, src: bytes, path: str) -> Any:
    return next(b for b in descendants(root, "binding")
                if text(b.child_by_field_name("attrpath"), src) == path)


def head(apply: Any, src: bytes) -> str:
    """The name of the function an application (curried or not) calls."""
    while apply.type == "apply_expression":
        apply = apply.child_by_field_name("function")
    return text(apply, src).split(".")[-1]


def declared(root: Any, src: bytes) -> set[str]:
    """Dotted option paths under options.services.agentos.memory."""
    found: set[str] = set()

    def walk(expr: Any, prefix: str) -> None:
        if expr.type in ("attrset_expression", "rec_attrset_expression"):
            for bd in descendants(expr, "binding"):
                if bd.parent.parent != expr:  # only this attrset's own bindings
                    continue
                name = prefix + text(bd.child_by_field_name("attrpath"), src)
                value = bd.child_by_field_name("expression")
                if value.type == "apply_expression" and head(value, src) in (
                        "mkOption", "mkEnableOption"):
                    found.add(name)
                else:
                    walk(value, name + ".")
        elif expr.type == "apply_expression":  # e.g. lib.recursiveUpdate (generated) { … }
            walk(expr.child_by_field_name("function"), prefix)
            walk(expr.child_by_field_name("argument"), prefix)
        elif expr.type == "parenthesized_expression":
            walk(expr.named_children[0], prefix)

    top = binding(root, src, ".".join(("options", *PREFIX)))
    walk(top.child_by_field_name("expression"), "")
    # the polled watchers: generated from `polledWatchers` under their option names
    module = src.decode()
    block = re.search(r"polledWatchers = \{(.*?)\};", module, re.S)
    rename = dict(re.findall(r'if name == "(\w+)" then "(\w+)"', module))
    assert block is not None
    for setting in re.findall(r"(\w+) = \d+;", block.group(1)):
        found |= {f"watchers.{rename.get(setting, setting)}.{o}" for o in ("enable", "interval")}
    return found


def aliases(root: Any, src: bytes) -> dict[str, tuple[str, str, list[str]]]:
    """old → (new, function, the string pieces of a conversion) from `imports`."""
    out: dict[str, tuple[str, str, list[str]]] = {}
    imports = binding(root, src, "imports").child_by_field_name("expression")
    for item in imports.named_children:
        call = item.named_children[0]
        args = []
        node = call
        while node.type == "apply_expression":
            args.insert(0, node.child_by_field_name("argument"))
            node = node.child_by_field_name("function")
        paths = [".".join(text(s, src).strip('"') for s in descendants(a, "string_expression"))
                 for a in args[:2]]
        conversion = [text(f, src) for a in args[2:] for f in descendants(a, "string_fragment")]
        out[paths[0]] = (paths[1], head(call, src), conversion)
    return out


def test_the_design_option_names_are_declared(tree: tuple[Any, bytes]) -> None:
    options = declared(*tree)
    assert {"nats.port", "postgres.dsn", "tiers.cold.retentionDays", "recall.mmrLambda",
            "watchers.packages.interval"} <= options  # the walk sees nested and generated ones
    missing = DESIGN_OPTIONS - options
    assert not missing, f"design names the module does not declare: {sorted(missing)}"


def test_the_earlier_names_are_aliases_of_the_design_names(tree: tuple[Any, bytes]) -> None:
    options, found = declared(*tree), aliases(*tree)
    assert set(found) == set(ALIASES)
    for old, (new, how) in ALIASES.items():
        assert found[old][:2] == (new, how), old
        assert new in options and old not in options, old
    # the changed ones convert the old number into the new duration string
    assert found["tiers.hot.retentionHours"][2] == ["h"]
    assert found["tiers.warm.retentionDays"][2] == ["d"]


def test_max_age_is_a_duration_turned_into_seconds() -> None:
    module = NIX.read_text()
    assert 'durationType = types.strMatching "[0-9]+[smhdw]";' in module
    assert "TR_INDEXER_HOT_MAX_AGE_S = toString (durationSeconds cfg.tiers.hot.maxAge);" in module
    assert "unit = { s = 1; m = 60; h = 3600; d = 86400; w = 604800; };" in module


def test_readme_names_the_options_and_the_aliases() -> None:
    readme = README.read_text()
    for name in ("tiers.{hot,warm}.maxAge", "recencyHalfLifeHours", "filesystem.{enable,watchPaths}",
                 "embedding.{model,buildDefaultModel,device,threads,batchSize}",
                 "patterns.{enable,detectionInterval,minObservations}", "docs/design.md` §14"):
        assert name in readme, name
    for old in ALIASES:
        assert old.replace("watchers.services.enable", "watchers.services.*").replace(
            "watchers.services.interval", "watchers.services.*") in readme, old
