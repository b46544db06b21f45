"""Helpers shared by the deploy tests: paths and the metric names the dashboards/alerts use."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
METRICS_MD = DEPLOY / "METRICS.md"

METRIC_NAME = re.compile(r"\btotalrecall_[a-z0-9_]+")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def dashboard_exprs() -> dict[str, list[str]]:
    """Dashboard file name -> every PromQL expression in it."""
    out: dict[str, list[str]] = {}
    for f in sorted((DEPLOY / "grafana" / "dashboards").glob("*.json")):
        out[f.name] = [str(t["expr"]) for p in json.loads(f.read_text())["panels"]
                       for t in p.get("targets", [])]
    return out


def alert_exprs() -> dict[str, str]:
    """Alert name -> expression, from prometheus/rules.yml."""
    doc = yaml.safe_load((DEPLOY / "prometheus" / "rules.yml").read_text())
    return {r.get("alert") or r["record"]: str(r["expr"])
            for g in doc["groups"] for r in g["rules"]}


def used_metrics() -> dict[str, set[str]]:
    """Metric name as written in PromQL -> where it is used."""
    used: dict[str, set[str]] = {}
    for where, exprs in dashboard_exprs().items():
        for e in exprs:
            for name in METRIC_NAME.findall(e):
                used.setdefault(name, set()).add(where)
    for alert, e in alert_exprs().items():
        for name in METRIC_NAME.findall(e):
            used.setdefault(name, set()).add(f"rules.yml:{alert}")
    return used


def listed_metrics() -> dict[str, dict[str, str]]:
    """METRICS.md rows: name -> {type, labels, service, status}."""
    rows: dict[str, dict[str, str]] = {}
    for line in METRICS_MD.read_text().splitlines():
        if not line.startswith("| `totalrecall_"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = cells[0].strip("`")
        assert name not in rows, f"METRICS.md lists {name} twice"
        rows[name] = {"type": cells[1], "labels": cells[2], "service": cells[3],
                      "status": cells[4]}
    return rows


def resolve(name: str, listed: dict[str, dict[str, str]]) -> str | None:
    """The METRICS.md entry a PromQL series name belongs to (histogram series -> base name)."""
    if name in listed:
        return name
    for suffix in HISTOGRAM_SUFFIXES:
        base = name[: -len(suffix)]
        if name.endswith(suffix) and listed.get(base, {}).get("type") == "histogram":
            return base
    return None
