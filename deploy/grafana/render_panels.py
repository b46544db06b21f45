"""Renders the Grafana dashboards in dashboards/ to PNGs straight from Prometheus, without Grafana.

    python deploy/grafana/render_panels.py --prometheus http://127.0.0.1:9090 --out docs/img \
        [--since 15m] [--end 2024-05-01T12:00:00Z] [--var namespace=default] [--only tr-recall] \
        [--suffix -steady] [--strict]

For each dashboard JSON it runs every panel's PromQL targets through Prometheus' HTTP API
(`/api/v1/query_range`), after substituting Grafana's variables (`$__rate_interval`,
`$__interval`, `$__range`, dashboard template variables as `$x`, `${x}`, `${x:raw}`, `[[x]]`),
and draws the dashboard as one PNG (`<out>/<uid>.png`) laid out like Grafana lays it out (the
panels' `gridPos` on a 24-column grid). Per panel: its title, its unit on the y axis, one line per
series named by the target's `legendFormat`, and a dashed line at each threshold the panel defines
(the 85 ms recall budget, the consumer-lag limit, …). `stat` panels show the last value of each
series (red at or over a threshold), `table` panels a table of the last values. A panel without
any series says "No data", as Grafana does; the run prints which panels were empty.

Why: Grafana is not packaged in Debian (nor on PyPI/npm), so the screenshots in
docs/dashboards.md are made this way; in Grafana itself the same JSON is provisioned
(docs/dashboards.md, "In Grafana"). Needs matplotlib (requirements-dev.txt). The pure parts
(substitution, legends, layout, parsing) are tested in tests/unit/deploy/test_deploy_render.py.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DASHBOARDS = Path(__file__).parent / "dashboards"
GRID_COLUMNS = 24

# ---------------------------------------------------------------------------------------------
# pure helpers (no network, no matplotlib): tested without either
# ---------------------------------------------------------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(text: str) -> float:
    """A Prometheus/Grafana duration ("15m", "1h30m", "90s", "250ms") in seconds."""
    text = text.strip()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"not a duration: {text!r}")
    return total


def format_duration(seconds: float) -> str:
    """Seconds as the largest whole Prometheus unit: 60 -> "1m", 90 -> "90s", 7200 -> "2h"."""
    s = max(1, round(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


def choose_step(range_s: float, max_points: int = 240, min_step_s: float = 15.0) -> float:
    """A query_range step: about `max_points` points over the range, never below the scrape interval."""
    return max(min_step_s, math.ceil(range_s / max_points))


def builtin_variables(range_s: float, step_s: float, scrape_s: float = 15.0) -> dict[str, str]:
    """Grafana's built-ins as it computes them for a Prometheus datasource:
    `$__rate_interval` = max(4 × scrape interval, step + scrape interval)."""
    return {"__interval": format_duration(step_s),
            "__interval_ms": str(int(step_s * 1000)),
            "__rate_interval": format_duration(max(4 * scrape_s, step_s + scrape_s)),
            "__range": format_duration(range_s),
            "__range_s": str(int(range_s)),
            "__range_ms": str(int(range_s * 1000))}


def template_variables(dashboard: dict[str, Any], overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The dashboard's template variables: `--var` overrides, else the saved current value, else
    the variable's "All" (`.*`, what Grafana sends for All with a regex matcher)."""
    out: dict[str, str] = {}
    for v in dashboard.get("templating", {}).get("list", []):
        name = v.get("name")
        if not name:
            continue
        value = (v.get("current") or {}).get("value")
        if isinstance(value, list):
            value = "|".join(str(x) for x in value)
        if value in (None, "", "$__all") or (isinstance(value, str) and value.startswith("$")):
            value = v.get("allValue") or ".*"
        if v.get("type") == "constant" and v.get("query"):
            value = v["query"]
        out[name] = str(value)
    out.update(overrides or {})
    return out


_VAR = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")


def substitute(expr: str, variables: dict[str, str], unknown: str = ".*") -> str:
    """Replace Grafana variables in a PromQL expression. A variable the dashboard does not define
    becomes `unknown` (".*", Grafana's All), so an expression still runs."""
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return variables.get(name, unknown)
    # longest names first is implicit: \w+ is greedy, so $__rate_interval never matches $__rate
    return _VAR.sub(repl, expr)


_LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


def legend(fmt: str, labels: dict[str, str]) -> str:
    """A series' name as Grafana shows it: `legendFormat` with `{{label}}` filled in (a missing
    label becomes empty), or, without a format, `name{a="b", …}`."""
    if fmt and fmt != "__auto":
        return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), fmt).strip()
    name = labels.get("__name__", "")
    rest = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{rest}}}" if rest or not name else name


@dataclass
class Series:
    labels: dict[str, str]
    times: list[float] = field(default_factory=list)   # unix seconds
    values: list[float] = field(default_factory=list)  # NaN where Prometheus returned NaN

    def finite(self) -> list[tuple[float, float]]:
        return [(t, v) for t, v in zip(self.times, self.values, strict=True) if math.isfinite(v)]

    @property
    def last(self) -> float | None:
        pts = self.finite()
        return pts[-1][1] if pts else None


def parse_query_range(payload: dict[str, Any]) -> list[Series]:
    """The series of a `/api/v1/query_range` answer (resultType matrix; a vector or scalar from
    `/api/v1/query` is accepted too). Values are strings in the API: "NaN", "+Inf" included."""
    if payload.get("status") != "success":
        raise RuntimeError(f"prometheus: {payload.get('errorType', '')}: {payload.get('error', payload)}")
    data = payload["data"]
    kind, result = data["resultType"], data["result"]
    if kind == "matrix":
        return [Series(dict(r["metric"]), [float(t) for t, _ in r["values"]],
                       [float(v) for _, v in r["values"]]) for r in result]
    if kind == "vector":
        return [Series(dict(r["metric"]), [float(r["value"][0])], [float(r["value"][1])]) for r in result]
    if kind == "scalar":
        return [Series({}, [float(result[0])], [float(result[1])])]
    raise ValueError(f"unsupported resultType {kind}")


def has_data(series: list[Series]) -> bool:
    return any(s.finite() for s in series)


@dataclass(frozen=True)
class Rect:
    """A panel's place in the figure, in figure fractions (matplotlib's add_axes order)."""
    left: float
    bottom: float
    width: float
    height: float


def layout(panels: list[dict[str, Any]], top_margin: float = 0.0,
           pad: float = 0.012) -> tuple[int, list[Rect]]:
    """Grafana's grid: 24 columns, `gridPos` {x, y, w, h} in grid units, y growing downwards.
    Returns the dashboard's height in grid units and one Rect per panel (figure fractions, with
    `top_margin` of the figure kept free for the title and `pad` between panels)."""
    rows = max((int(p["gridPos"]["y"]) + int(p["gridPos"]["h"]) for p in panels), default=0)
    rects = []
    usable = 1.0 - top_margin
    for p in panels:
        g = p["gridPos"]
        x, y, w, h = (int(g[k]) for k in ("x", "y", "w", "h"))
        left = x / GRID_COLUMNS + pad
        width = w / GRID_COLUMNS - 2 * pad
        top = 1.0 - top_margin - usable * y / rows
        height = usable * h / rows
        rects.append(Rect(left, top - height + pad, width, height - 2 * pad))
    return rows, rects


def thresholds(panel: dict[str, Any]) -> list[float]:
    """The panel's threshold values (the base step, value null, is not a line)."""
    steps = (panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}) or {}).get("steps", [])
    return [float(s["value"]) for s in steps if s.get("value") is not None]


def format_value(value: float, unit: str) -> str:
    """A value in the panel's Grafana unit, as a short label."""
    if not math.isfinite(value):
        return str(value)
    a = abs(value)
    if unit == "s":
        if a == 0:
            return "0"
        if a < 1e-3:
            return f"{value * 1e6:.0f} µs"
        if a < 1:
            return f"{value * 1e3:.3g} ms"
        return f"{value:.3g} s"
    if unit == "bytes":
        for suffix, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if a >= size:
                return f"{value / size:.3g} {suffix}"
        return f"{value:.0f} B"
    if unit == "percentunit":
        return f"{value * 100:.3g}%"
    if unit in ("ops", "reqps"):
        return f"{value:.3g}/s"
    if a >= 1e6:
        return f"{value / 1e6:.3g}M"
    if a >= 1e4:
        return f"{value / 1e3:.3g}k"
    return f"{value:.4g}"


# ---------------------------------------------------------------------------------------------
# Prometheus
# ---------------------------------------------------------------------------------------------

def query_range(prometheus: str, expr: str, start: float, end: float, step: float,
                timeout: float = 30.0) -> list[Series]:
    params = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                     "step": f"{step:g}"})
    url = f"{prometheus.rstrip('/')}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the operator's URL
            return parse_query_range(json.loads(r.read()))
    except urllib.error.HTTPError as exc:  # 400/422: a bad query, the body says why
        return parse_query_range(json.loads(exc.read() or b"{}"))


@dataclass
class PanelData:
    panel: dict[str, Any]
    series: list[tuple[str, Series]]  # (legend, series)
    errors: list[str]


def fetch_dashboard(prometheus: str, dashboard: dict[str, Any], start: float, end: float,
                    step: float, variables: dict[str, str]) -> list[PanelData]:
    out = []
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            continue
        named: list[tuple[str, Series]] = []
        errors: list[str] = []
        for target in panel.get("targets", []):
            if target.get("hide"):
                continue
            expr = substitute(str(target["expr"]), variables)
            try:
                series = query_range(prometheus, expr, start, end, step)
            except (OSError, RuntimeError, ValueError) as exc:
                errors.append(f"{expr}: {exc}")
                continue
            fmt = substitute(str(target.get("legendFormat", "")), variables, unknown="")
            named += [(legend(fmt, s.labels) or expr, s) for s in series]
        out.append(PanelData(panel, named, errors))
    return out


# ---------------------------------------------------------------------------------------------
# drawing (matplotlib, Agg)
# ---------------------------------------------------------------------------------------------

def _draw_timeseries(ax: Any, pd: PanelData, unit: str, start: float, end: float) -> None:
    import matplotlib.dates as mdates
    from matplotlib.ticker import FuncFormatter

    for name, s in pd.series:
        if not s.finite():
            continue
        xs = [datetime.fromtimestamp(t, UTC) for t in s.times]
        ax.plot(xs, s.values, linewidth=1.4, label=name)
    ys = [v for _, s in pd.series for _, v in s.finite()]
    for t in thresholds(pd.panel):
        ax.axhline(t, color="#e02f44", linestyle="--", linewidth=1.1)
        ax.annotate(format_value(t, unit), xy=(1, t), xycoords=("axes fraction", "data"),
                    xytext=(-3, 2), textcoords="offset points", ha="right", va="bottom",
                    color="#e02f44", fontsize=7)
        ys.append(t)
    ax.set_xlim(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
    if ys:
        lo, hi = min(0.0, *ys), max(ys)
        ax.set_ylim(lo, hi * 1.15 if hi > 0 else 1)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=UTC))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_value(v, unit)))
    ax.tick_params(labelsize=7)
    ax.grid(True, color="#e5e5e5", linewidth=0.6)
    if any(s.finite() for _, s in pd.series):
        ax.legend(fontsize=7, loc="upper left", frameon=False, ncol=2 if len(pd.series) > 4 else 1)


def _draw_stat(ax: Any, pd: PanelData, unit: str) -> None:
    ax.axis("off")
    values = [(name, s.last) for name, s in pd.series if s.last is not None]
    limits = thresholds(pd.panel)
    n = len(values)
    for i, (name, v) in enumerate(values):
        assert v is not None
        red = any(v >= t for t in limits)
        x = (i + 0.5) / n
        ax.text(x, 0.5, format_value(v, unit), ha="center", va="center",
                fontsize=max(10, 30 - 3 * n), weight="bold", color="#e02f44" if red else "#299c46",
                transform=ax.transAxes)
        if name:
            ax.text(x, 0.18, name, ha="center", va="center", fontsize=8, transform=ax.transAxes)


def _draw_table(ax: Any, pd: PanelData, unit: str) -> None:
    ax.axis("off")
    rows = sorted((name, format_value(s.last, unit)) for name, s in pd.series if s.last is not None)
    if not rows:
        return
    table = ax.table(cellText=[list(r) for r in rows], colLabels=["series", "value"],
                     loc="upper center", cellLoc="left", colWidths=[0.75, 0.2])
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1, 1.1)


def render_dashboard(dashboard: dict[str, Any], data: list[PanelData], out: Path,
                     start: float, end: float, source: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [pd.panel for pd in data]
    rows, _ = layout(panels)
    height_in = 0.3 * rows + 0.9
    top_margin = 0.8 / height_in
    _, rects = layout(panels, top_margin=top_margin)
    fig = plt.figure(figsize=(16, height_in), dpi=100, facecolor="white")
    t0 = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d %H:%M")
    t1 = datetime.fromtimestamp(end, UTC).strftime("%H:%M UTC")
    fig.suptitle(dashboard.get("title", dashboard.get("uid", "")), x=0.01, y=1 - 0.15 / height_in,
                 ha="left", fontsize=14, weight="bold")
    fig.text(0.99, 1 - 0.2 / height_in, f"{t0} – {t1} · data: {source} · drawn by "
             f"deploy/grafana/render_panels.py (same PromQL as the Grafana dashboard)",
             ha="right", va="top", fontsize=8, color="#555555")
    fig_w, fig_h = 16.0, height_in
    for pd, r in zip(data, rects, strict=True):
        kind = pd.panel.get("type", "timeseries")
        # room inside the panel's cell for the y tick labels, the x tick labels and the title
        left, bottom, top = (0.7, 0.3, 0.3) if kind == "timeseries" else (0.1, 0.1, 0.3)
        ax = fig.add_axes((r.left + left / fig_w, r.bottom + bottom / fig_h,
                           r.width - (left + 0.05) / fig_w, r.height - (bottom + top) / fig_h))
        frame = fig.add_axes((r.left, r.bottom, r.width, r.height), zorder=-1)
        frame.set_xticks([])
        frame.set_yticks([])
        for spine in frame.spines.values():
            spine.set_color("#d8d8d8")
        unit = str(pd.panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short"))
        ax.set_title(pd.panel.get("title", ""), fontsize=9, loc="left", weight="bold")
        if not has_data([s for _, s in pd.series]):
            ax.set_xticks([])
            ax.set_yticks([])
            msg = "No data" + ("\n" + pd.errors[0][:120] if pd.errors else "")
            ax.text(0.5, 0.5, msg, ha="center", va="center", color="#888888", fontsize=10,
                    transform=ax.transAxes, wrap=True)
        elif kind == "stat":
            _draw_stat(ax, pd, unit)
        elif kind == "table":
            _draw_table(ax, pd, unit)
        else:
            _draw_timeseries(ax, pd, unit, start, end)
        for spine in ax.spines.values():
            spine.set_color("#cccccc" if kind == "timeseries" else "none")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prometheus", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    ap.add_argument("--out", type=Path, required=True, help="directory for <uid>.png")
    ap.add_argument("--since", default="15m", help="time range ending at --end (default 15m)")
    ap.add_argument("--end", default=None, help="end of the range, ISO 8601 (default: now)")
    ap.add_argument("--step", default=None, help="query_range step (default: range/240, at least 15s)")
    ap.add_argument("--scrape-interval", default="15s", help="for $__rate_interval (default 15s)")
    ap.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                    help="a dashboard variable's value (repeatable)")
    ap.add_argument("--dashboards", type=Path, default=DASHBOARDS)
    ap.add_argument("--only", action="append", default=[], help="dashboard uid(s) to render")
    ap.add_argument("--suffix", default="", help="file name suffix: <uid><suffix>.png")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a panel has no data")
    a = ap.parse_args(argv)

    end = datetime.fromisoformat(a.end.replace("Z", "+00:00")).timestamp() if a.end else \
        datetime.now(UTC).timestamp()
    range_s = parse_duration(a.since)
    start = end - range_s
    step = parse_duration(a.step) if a.step else choose_step(range_s)
    overrides = dict(v.split("=", 1) for v in a.var)
    empty_total = 0
    for f in sorted(a.dashboards.glob("*.json")):
        dashboard = json.loads(f.read_text())
        uid = dashboard.get("uid", f.stem)
        if a.only and uid not in a.only:
            continue
        variables = {**builtin_variables(range_s, step, parse_duration(a.scrape_interval)),
                     **template_variables(dashboard, overrides)}
        data = fetch_dashboard(a.prometheus, dashboard, start, end, step, variables)
        out = a.out / f"{uid}{a.suffix}.png"
        render_dashboard(dashboard, data, out, start, end, a.prometheus)
        empty = [pd for pd in data if not has_data([s for _, s in pd.series])]
        empty_total += len(empty)
        print(f"{out}: {len(data) - len(empty)}/{len(data)} panels with data")
        for pd in empty:
            why = f" ({'; '.join(pd.errors)})" if pd.errors else ""
            print(f"  no data: {pd.panel.get('title')}{why}")
    return 1 if a.strict and empty_total else 0


if __name__ == "__main__":
    sys.exit(main())
