"""systemd units (systemd-analyze verify when it is there), the NixOS module (parsed with the
tree-sitter Nix grammar: there is no nix binary here), and every TR_* variable that compose,
systemd or NixOS set is a real setting of the service it is meant for."""

from __future__ import annotations

import configparser
import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from deploy_common import DEPLOY, REPO

SYSTEMD = DEPLOY / "systemd"
NIX = DEPLOY / "nixos" / "module.nix"
SERVICES = {"embedder": "totalrecall_embedder", "indexer": "totalrecall_indexer",
            "recall-api": "totalrecall_recall_api", "watchers": "totalrecall_watchers"}
PREFIXES = {"TR_EMBEDDER_": "totalrecall_embedder", "TR_INDEXER_": "totalrecall_indexer",
            "TR_RECALL_": "totalrecall_recall_api", "TR_WATCHERS_": "totalrecall_watchers"}
# Variables the deployment already sets for settings a service has not implemented yet (they are
# ignored until then: every Settings has extra="ignore"). Remove an entry once it exists.
PENDING: dict[str, str] = {}
# Read by every service's settings (`ServiceSettings`'s default), under no service's prefix.
SHARED = {"TR_NATS_REPLICAS": "nats_replicas"}


def _unit(path: Path) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read_string(path.read_text())
    return cp


def test_service_units_share_env_file_and_hardening() -> None:
    target = _unit(SYSTEMD / "totalrecall.target")
    wants = target["Unit"]["Wants"].split()
    for svc, module in SERVICES.items():
        name = f"totalrecall-{svc}.service"
        assert name in wants
        u = _unit(SYSTEMD / name)
        s = u["Service"]
        assert s["EnvironmentFile"] == "/etc/totalrecall/env"
        assert s["ExecStart"].endswith(f"python -m {module}")
        assert s["User"] == "totalrecall" and s["NoNewPrivileges"] == "yes"
        assert s["ProtectSystem"] == "strict" and s["CapabilityBoundingSet"] == ""
        assert s["ReadWritePaths"] == "/var/lib/totalrecall"
        assert u["Install"]["WantedBy"] == "totalrecall.target"
        assert "nats-server.service" in u["Unit"]["After"]
    assert "nats-server.service" in wants


def test_units_pass_systemd_analyze_verify() -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze not installed")
    units = [*sorted(str(p) for p in SYSTEMD.glob("*.service")), str(SYSTEMD / "totalrecall.target")]
    r = subprocess.run([tool, "verify", "--man=no", *units], capture_output=True, text=True,
                       timeout=60)
    # The ExecStart binaries (/opt/totalrecall/.venv) do not exist on a build machine: fine.
    problems = [ln for ln in (r.stdout + r.stderr).splitlines()
                if ln.strip() and "is not executable" not in ln]
    assert not problems, "\n".join(problems)


def test_nix_module_parses() -> None:
    ts = pytest.importorskip("tree_sitter", reason="pip install tree-sitter tree-sitter-nix")
    tsn = pytest.importorskip("tree_sitter_nix", reason="pip install tree-sitter tree-sitter-nix")
    parser = ts.Parser(ts.Language(tsn.language()))
    src = NIX.read_bytes()
    tree = parser.parse(src)
    errors: list[str] = []

    def walk(node) -> None:  # type: ignore[no-untyped-def]
        if node.type == "ERROR" or node.is_missing:
            line = node.start_point[0] + 1
            errors.append(f"line {line}: {src[node.start_byte:node.end_byte][:60]!r}")
        for child in node.children:
            walk(child)

    walk(tree.root_node)
    assert not errors, errors
    # and the grammar does reject broken Nix
    assert parser.parse(b"{ a = 1; b = [ 1 2 ; }").root_node.has_error


def test_nix_module_exposes_the_options() -> None:
    text = NIX.read_text()
    assert "options.services.agentos.memory" in text
    # (the option names themselves: test_deploy_nixos_options.py)
    for svc in ("totalrecall-nats", *(f"totalrecall-{s}" for s in SERVICES)):
        assert f"{svc} = " in text, svc
    # the polled watchers the module configures are watchers the service has
    block = re.search(r"polledWatchers = \{(.*?)\};", text, re.S)
    assert block
    names = re.findall(r"(\w+) = \d+;", block.group(1))
    watchers = importlib.import_module("totalrecall_watchers.settings").Settings.model_fields
    for n in names:
        assert n in watchers, n
        fields = watchers[n].annotation.model_fields  # type: ignore[union-attr]
        assert "enabled" in fields and "interval_s" in fields, n


def _tr_variables() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    sources = {
        "docker-compose.yml": re.findall(r"^\s+(TR_[A-Z0-9_]+):", (REPO / "docker-compose.yml").read_text(), re.M),
        ".env.example": re.findall(r"^#?\s*(TR_[A-Z0-9_]+)=", (REPO / ".env.example").read_text(), re.M),
        "systemd/env.example": re.findall(r"^#?\s*(TR_[A-Z0-9_]+)=", (SYSTEMD / "env.example").read_text(), re.M),
        "nixos/module.nix": re.findall(r"\b(TR_[A-Z0-9_]+) =", NIX.read_text()),
    }
    for where, names in sources.items():
        for n in names:
            found.setdefault(n, set()).add(where)
    return found


def _is_setting(var: str) -> bool:
    if var in SHARED:
        from totalrecall_schema.service_settings import ServiceSettings

        return SHARED[var] in ServiceSettings.model_fields
    for prefix, package in PREFIXES.items():
        if var.startswith(prefix):
            model = importlib.import_module(f"{package}.settings").Settings
            *path, last = var[len(prefix):].lower().split("__")
            for part in path:
                if part not in model.model_fields:
                    return False
                model = model.model_fields[part].annotation
            return last in model.model_fields
    return False


def test_every_tr_variable_is_a_setting() -> None:
    found = _tr_variables()
    assert len(found) > 15
    unknown = {v: sorted(w) for v, w in found.items() if v not in PENDING and not _is_setting(v)}
    assert not unknown, f"not a field of the service's Settings: {unknown}"


def test_pending_variables_are_implemented() -> None:
    missing = {v: why for v, why in PENDING.items() if not _is_setting(v)}
    assert not missing, missing
