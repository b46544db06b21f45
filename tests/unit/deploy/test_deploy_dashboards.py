"""Grafana: the committed dashboards are what build_dashboards.py generates, and they reference the
provisioned Prometheus datasource; Prometheus: the scrape configs name the four services."""

from __future__ import annotations

import importlib.util
import json
import re

import yaml
from deploy_common import DEPLOY, REPO, alert_exprs

GRAFANA = DEPLOY / "grafana"
PORTS = {"recall-api": 8765, "embedder": 8766, "indexer": 8767, "watchers": 8768}


def _builder():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("build_dashboards", GRAFANA / "build_dashboards.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_dashboards_are_generated_output() -> None:
    rendered = _builder().render()
    on_disk = {f.name: f.read_text() for f in (GRAFANA / "dashboards").glob("*.json")}
    assert set(rendered) == set(on_disk), "run: python deploy/grafana/build_dashboards.py"
    stale = [n for n in rendered if rendered[n] != on_disk[n]]
    assert not stale, f"stale, run: python deploy/grafana/build_dashboards.py ({stale})"


def test_four_dashboards_with_the_provisioned_datasource() -> None:
    ds = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    titles = set()
    uids = set()
    for f in sorted((GRAFANA / "dashboards").glob("*.json")):
        d = json.loads(f.read_text())
        assert d["uid"] not in uids
        uids.add(d["uid"])
        titles.add(d["title"])
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), f.name
        for p in d["panels"]:
            assert p["targets"], (f.name, p["title"])
            for t in [p, *p["targets"]]:
                assert t["datasource"] == {"type": "prometheus", "uid": source["uid"]}, (f.name, p["title"])
    assert {"Total Recall — pipeline", "Total Recall — recall latency vs budget",
            "Total Recall — tiers and storage", "Total Recall — watchers"} <= titles


def test_dashboard_provider_path_is_where_compose_mounts_them() -> None:
    prov = yaml.safe_load((GRAFANA / "provisioning/dashboards/totalrecall.yml").read_text())
    path = prov["providers"][0]["options"]["path"]
    assert f"./deploy/grafana/dashboards:{path}:ro" in (REPO / "docker-compose.yml").read_text()


def test_scrape_configs_name_the_four_services() -> None:
    for config, host in (("prometheus.compose.yml", None), ("prometheus.local.yml", "127.0.0.1")):
        doc = yaml.safe_load((DEPLOY / "prometheus" / config).read_text())
        assert doc["rule_files"] == ["rules.yml"], config
        jobs = {j["job_name"]: j["static_configs"][0]["targets"] for j in doc["scrape_configs"]}
        assert jobs == {f"totalrecall-{s}": [f"{host or s}:{p}"] for s, p in PORTS.items()}, config
        assert all(re.fullmatch("totalrecall-.*", j) for j in jobs)  # ServiceDown's selector


def test_alerts_the_brief_asks_for_exist() -> None:
    alerts = alert_exprs()
    assert 'totalrecall_recall_stage_seconds_bucket{stage="total"}' in alerts["RecallLatencyBudgetExceeded"]
    assert "> 0.085" in alerts["RecallLatencyBudgetExceeded"]
    assert "totalrecall_embedder_consumer_pending" in alerts["EmbedderConsumerLagGrowing"]
    assert "totalrecall_indexer_consumer_pending" in alerts["IndexerConsumerLagGrowing"]
    assert "totalrecall_embedder_fallback_state" in alerts["EmbedderOnCpuFallback"]
    assert 'state="failed"' in alerts["WatcherDown"]
    assert "totalrecall_indexer_dlq_messages" in alerts["DeadLettersPresent"]
    assert "totalrecall_indexer_state_disk_free_bytes" in alerts["StateDiskFilling"]
