"""Every metric the dashboards and alert rules use is one the running services really export."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import yaml
from stacklib import Api

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
_NAME = re.compile(r"\btotalrecall_[a-z0-9_]+")


def _used() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for f in sorted((DEPLOY / "grafana" / "dashboards").glob("*.json")):
        for panel in json.loads(f.read_text())["panels"]:
            for t in panel["targets"]:
                for name in _NAME.findall(t["expr"]):
                    used.setdefault(name, set()).add(f.name)
    for group in yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text())["groups"]:
        for rule in group["rules"]:
            for name in _NAME.findall(rule["expr"]):
                used.setdefault(name, set()).add("rules.yml")
    return used


def _exported(stack: Api) -> set[str]:
    assert stack.ports is not None
    names: set[str] = set()
    for service in ("api", "embedder", "indexer", "watchers"):
        text = httpx.get(f"http://127.0.0.1:{stack.ports[service]}/metrics", timeout=10).text
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                name, kind = line.split()[2:4]
                names.add(name)
                if kind == "histogram":
                    names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
                if kind == "counter":
                    names.add(f"{name}_total" if not name.endswith("_total") else name)
    return names


def test_dashboards_and_alerts_use_only_exported_metrics(stack: Api) -> None:
    used, exported = _used(), _exported(stack)
    assert len(used) > 20
    missing = {name: sorted(where) for name, where in used.items() if name not in exported}
    assert not missing, f"used but not exported: {missing}"


def test_metric_names_follow_the_convention(stack: Api) -> None:
    for name in _exported(stack):
        if name.startswith("totalrecall_"):
            service = name.split("_")[1]
            assert service in {"recall", "embedder", "indexer", "watchers"}, name
