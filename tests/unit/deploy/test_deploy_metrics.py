"""deploy/METRICS.md is the canonical list of metric names: the dashboards and alert rules use only
names listed there, and the `exported` ones are what the services' Metrics classes register."""

from __future__ import annotations

import importlib

import pytest
from deploy_common import listed_metrics, resolve, used_metrics

SERVICES = {
    "recall-api": "totalrecall_recall_api.metrics",
    "embedder": "totalrecall_embedder.metrics",
    "indexer": "totalrecall_indexer.metrics",
    "watchers": "totalrecall_watchers.metrics",
}
TYPES = {"counter", "gauge", "histogram", "summary", "info"}


def registered(service: str) -> dict[str, str]:
    """Names (as used in PromQL: counters with _total) -> type, from a fresh Metrics()."""
    metrics = importlib.import_module(SERVICES[service]).Metrics()
    out: dict[str, str] = {}
    for fam in metrics.registry.collect():
        name = f"{fam.name}_total" if fam.type == "counter" else fam.name
        out[name] = fam.type
    return out


def test_metrics_md_rows_are_well_formed() -> None:
    listed = listed_metrics()
    assert len(listed) > 30
    for name, row in listed.items():
        assert row["type"] in TYPES, (name, row)
        assert row["service"] in SERVICES, (name, row)
        assert row["status"] in {"exported", "required"}, (name, row)
        prefix = {"recall-api": "recall"}.get(row["service"], row["service"])
        assert name.startswith(f"totalrecall_{prefix}_"), f"{name} is not named after {row['service']}"
        if row["type"] == "counter":
            assert name.endswith("_total"), name


def test_dashboards_and_alerts_use_only_listed_metrics() -> None:
    listed = listed_metrics()
    used = used_metrics()
    assert len(used) > 20
    unknown = {n: sorted(w) for n, w in used.items() if resolve(n, listed) is None}
    assert not unknown, f"add these to deploy/METRICS.md (or fix the query): {unknown}"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_exported_entries_match_what_the_service_registers(service: str) -> None:
    listed = {n: r for n, r in listed_metrics().items() if r["service"] == service}
    have = registered(service)
    claimed = {n for n, r in listed.items() if r["status"] == "exported"}
    missing = sorted(claimed - set(have))
    assert not missing, f"METRICS.md says {service} exports these, its Metrics class does not: {missing}"
    wrong_type = {n: (listed[n]["type"], have[n]) for n in claimed if listed[n]["type"] != have[n]}
    assert not wrong_type, f"type in METRICS.md vs registered: {wrong_type}"
    unlisted = sorted(set(have) - set(listed))
    assert not unlisted, f"{service} registers metrics METRICS.md does not list: {unlisted}"
    stale = sorted(n for n, r in listed.items() if r["status"] == "required" and n in have)
    assert not stale, f"now exported by {service}: mark them `exported` in METRICS.md: {stale}"


def test_required_metrics_are_exported() -> None:
    required = {n: r["service"] for n, r in listed_metrics().items() if r["status"] == "required"}
    have = {n for s in SERVICES for n in registered(s)}
    missing = {n: s for n, s in required.items() if n not in have}
    assert not missing, f"dashboards/alerts wait for: {missing}"
