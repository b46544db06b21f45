"""deploy/grafana/render_panels.py, the pure parts (no network, no matplotlib): Grafana variable
substitution, legends, layout from gridPos, parsing a query_range answer, thresholds, units."""

from __future__ import annotations

import importlib.util
import json
import math
import sys

import pytest
from deploy_common import DEPLOY

GRAFANA = DEPLOY / "grafana"


def _renderer():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("render_panels", GRAFANA / "render_panels.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["render_panels"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


rp = _renderer()


def test_durations() -> None:
    assert rp.parse_duration("15m") == 900
    assert rp.parse_duration("1h30m") == 5400
    assert rp.parse_duration("250ms") == 0.25
    with pytest.raises(ValueError):
        rp.parse_duration("15 minutes")
    with pytest.raises(ValueError):
        rp.parse_duration("")
    assert [rp.format_duration(s) for s in (60, 90, 7200, 86400, 0.2)] == ["1m", "90s", "2h", "1d", "1s"]
    assert rp.choose_step(900) == 15           # never below the scrape interval
    assert rp.choose_step(6 * 3600) == 90      # ~240 points


def test_builtin_variables_follow_grafana() -> None:
    v = rp.builtin_variables(range_s=900, step_s=15, scrape_s=15)
    assert v["__rate_interval"] == "1m"        # max(4 × scrape, step + scrape)
    assert v["__interval"] == "15s" and v["__range"] == "15m" and v["__interval_ms"] == "15000"
    assert rp.builtin_variables(range_s=86400, step_s=360)["__rate_interval"] == "375s"


def test_substitute_all_variable_syntaxes() -> None:
    variables = {**rp.builtin_variables(900, 15), "namespace": "default", "tier": "hot|warm"}
    expr = ('sum(rate(x_total{namespace="$namespace", tier=~"${tier}"}[$__rate_interval]))'
            ' / sum(rate(y_total{ns="[[namespace]]", t=~"${tier:regex}"}[$__interval]))')
    assert rp.substitute(expr, variables) == (
        'sum(rate(x_total{namespace="default", tier=~"hot|warm"}[1m]))'
        ' / sum(rate(y_total{ns="default", t=~"hot|warm"}[15s]))')
    # $__rate_interval is not read as $__rate + "_interval"; an unknown variable is Grafana's All
    assert rp.substitute('a{b=~"$nope"}[$__rate_interval]', {"__rate_interval": "1m"}) == 'a{b=~".*"}[1m]'
    # no variables: unchanged (every committed dashboard query today)
    assert rp.substitute('histogram_quantile(0.99, sum by (le) (rate(h_bucket{stage="total"}[5m])))', {}) \
        == 'histogram_quantile(0.99, sum by (le) (rate(h_bucket{stage="total"}[5m])))'


def test_template_variables_from_the_dashboard() -> None:
    dashboard = {"templating": {"list": [
        {"name": "namespace", "type": "query", "current": {"value": "default"}},
        {"name": "tier", "type": "custom", "current": {"value": ["hot", "warm"]}},
        {"name": "svc", "type": "query", "current": {"value": "$__all"}, "allValue": "totalrecall-.*"},
        {"name": "job", "type": "query"},
        {"name": "budget", "type": "constant", "query": "0.085"},
    ]}}
    assert rp.template_variables(dashboard) == {
        "namespace": "default", "tier": "hot|warm", "svc": "totalrecall-.*", "job": ".*", "budget": "0.085"}
    assert rp.template_variables(dashboard, {"namespace": "work"})["namespace"] == "work"
    assert rp.template_variables({}) == {}


def test_legend() -> None:
    labels = {"__name__": "up", "job": "totalrecall-indexer", "instance": "127.0.0.1:8767"}
    assert rp.legend("{{job}}", labels) == "totalrecall-indexer"
    assert rp.legend("{{ src }} → {{dst}}", {"src": "hot", "dst": "warm"}) == "hot → warm"
    assert rp.legend("p99 {{tier}}", {}) == "p99"
    assert rp.legend("", labels) == 'up{instance="127.0.0.1:8767", job="totalrecall-indexer"}'
    assert rp.legend("", {"stage": "total"}) == '{stage="total"}'


def test_parse_query_range_matrix_with_nan() -> None:
    payload = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"stage": "total"}, "values": [[1700000000, "0.05"], [1700000015, "NaN"],
                                                  [1700000030.5, "0.07"]]},
        {"metric": {"stage": "embed"}, "values": [[1700000000, "NaN"]]},
    ]}}
    total, embed = rp.parse_query_range(payload)
    assert total.labels == {"stage": "total"}
    assert total.times == [1700000000.0, 1700000015.0, 1700000030.5]
    assert total.values[0] == 0.05 and math.isnan(total.values[1])
    assert total.finite() == [(1700000000.0, 0.05), (1700000030.5, 0.07)]
    assert total.last == 0.07 and embed.last is None
    assert rp.has_data([total]) and not rp.has_data([embed]) and not rp.has_data([])


def test_parse_other_result_types_and_errors() -> None:
    (v,) = rp.parse_query_range({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"job": "x"}, "value": [1700000000, "+Inf"]}]}})
    assert v.values == [math.inf] and v.last is None
    (s,) = rp.parse_query_range({"status": "success", "data": {"resultType": "scalar",
                                                               "result": [1700000000, "2"]}})
    assert s.last == 2.0
    with pytest.raises(RuntimeError, match="bad_data"):
        rp.parse_query_range({"status": "error", "errorType": "bad_data", "error": "parse error"})


def test_layout_follows_grid_pos() -> None:
    panels = [{"gridPos": {"x": 0, "y": 0, "w": 12, "h": 8}},
              {"gridPos": {"x": 12, "y": 0, "w": 12, "h": 8}},
              {"gridPos": {"x": 0, "y": 8, "w": 24, "h": 4}}]
    rows, rects = rp.layout(panels, top_margin=0.0, pad=0.0)
    assert rows == 12
    a, b, c = rects
    assert (a.left, a.width) == (0.0, 0.5) and (b.left, b.width) == (0.5, 0.5)
    assert a.bottom == pytest.approx(1 / 3) and a.height == pytest.approx(2 / 3)
    assert (c.left, c.width) == (0.0, 1.0) and c.bottom == pytest.approx(0.0)
    assert c.height == pytest.approx(1 / 3)
    # with a title margin and padding, panels stay inside the figure and do not overlap
    _, rects = rp.layout(panels, top_margin=0.1, pad=0.01)
    for r in rects:
        assert r.left >= 0 and r.left + r.width <= 1 and r.bottom >= 0 and r.bottom + r.height <= 0.9 + 1e-9
    assert rects[0].left + rects[0].width < rects[1].left
    assert rects[2].bottom + rects[2].height < rects[0].bottom


def test_committed_dashboards_lay_out_and_define_the_budget() -> None:
    for f in sorted((GRAFANA / "dashboards").glob("*.json")):
        panels = json.loads(f.read_text())["panels"]
        rows, rects = rp.layout(panels, top_margin=0.05)
        assert rows > 0 and len(rects) == len(panels)
    recall = json.loads((GRAFANA / "dashboards" / "tr-recall.json").read_text())
    assert rp.thresholds(recall["panels"][0]) == [0.085]  # the 85 ms recall budget line


def test_format_value_per_unit() -> None:
    assert rp.format_value(0.085, "s") == "85 ms"
    assert rp.format_value(0.00025, "s") == "250 µs"
    assert rp.format_value(2.5, "s") == "2.5 s"
    assert rp.format_value(3 * 2**30, "bytes") == "3 GiB"
    assert rp.format_value(0.5, "percentunit") == "50%"
    assert rp.format_value(0.25, "ops") == "0.25/s"
    assert rp.format_value(12345, "short") == "12.3k"
