"""Containers watcher, pure: the engines' `system df` rows, and when their disk use is news
(a threshold crossed, a kind's size changed enough) with what could be reclaimed and how."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent, Severity
from totalrecall_schema.taxonomy import CONTAINER_DISK_ADVISED_BYTES

from .base import EventContext
from .containers_events import CATEGORY, si, to_int

if TYPE_CHECKING:
    from ..settings import ContainersSettings

GB = 1_000_000_000  # the engines' `system df` counts in decimal units
#: `system df` rows by their `Type`, and what reclaims each (per engine).
DF_KINDS = {"images": "images", "containers": "containers", "local volumes": "volumes",
            "volumes": "volumes", "build cache": "build_cache"}
DF_ORDER = ("images", "containers", "volumes", "build_cache")
DF_NAMES = {"images": "images", "containers": "containers", "volumes": "volumes",
            "build_cache": "build cache"}
DF_WORDS = {"images": "images", "containers": "stopped containers", "volumes": "unused volumes",
            "build_cache": "build cache"}
PRUNE = {"images": "{cli} image prune -a", "containers": "{cli} container prune",
         "volumes": "{cli} volume prune", "build_cache": "{cli} builder prune"}


@dataclass(frozen=True)
class DiskRow:
    kind: str  # images, containers, volumes, build_cache
    count: int
    active: int
    size: int
    reclaimable: int


_SIZE = re.compile(r"^\s*([\d.]+)\s*([kKMGTP]?i?B)?")
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "PIB": 2**50}


def parse_size(v: Any) -> int | None:
    """A size as the engines print it: bytes (int) or `2.917GB`, `1.2GB (50%)`, `0B`."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return int(v)
    m = _SIZE.match(str(v))
    if not m:
        return None
    unit = _UNITS.get((m.group(2) or "").upper())
    try:
        return int(float(m.group(1)) * unit) if unit is not None else None
    except ValueError:
        return None


def parse_df(text: str) -> list[DiskRow]:
    """`<engine> system df --format '{{json .}}'` (one object per line) or a JSON array (podman
    ≥ 4.4's `--format json`). podman gives bytes (`Size`, or `RawSize`), docker human sizes."""
    text = text.strip()
    objs: list[Any] = []
    if text.startswith("["):
        objs = json.loads(text)
    else:
        objs = [json.loads(line) for line in text.splitlines() if line.strip()]
    rows: list[DiskRow] = []
    for o in objs:
        if not isinstance(o, dict):
            raise ValueError(f"not a disk-use row: {str(o)[:100]}")
        kind = DF_KINDS.get(str(o.get("Type", "")).strip().lower())
        if kind is None:
            continue
        size = parse_size(o["RawSize"]) if "RawSize" in o else parse_size(o.get("Size"))
        recl = parse_size(o["RawReclaimable"]) if "RawReclaimable" in o \
            else parse_size(o.get("Reclaimable"))
        rows.append(DiskRow(kind, to_int(o.get("TotalCount", o.get("Total"))) or 0,
                            to_int(o.get("Active")) or 0, size or 0, recl or 0))
    if not rows:
        raise ValueError(f"no disk-use rows in {text[:200]!r}")
    return rows


@dataclass
class DiskState:
    """What one engine's disk use was when last reported, and which thresholds are crossed."""

    baseline: dict[str, int] | None = None
    total_alerted: bool = False
    reclaimable_alerted: bool = False


def _by_kind(rows: list[DiskRow]) -> dict[str, DiskRow]:
    by_kind: dict[str, DiskRow] = {}
    for r in rows:
        prev = by_kind.get(r.kind)
        by_kind[r.kind] = r if prev is None else DiskRow(
            r.kind, prev.count + r.count, prev.active + r.active, prev.size + r.size,
            prev.reclaimable + r.reclaimable)
    return by_kind


def _crossings(s: ContainersSettings, st: DiskState, total: int, reclaimable: int,
               reasons: list[str]) -> list[str]:
    """The thresholds crossed now (once per crossing; re-armed below threshold × rearm_factor)."""
    crossed: list[str] = []
    total_thr = s.disk_total_gb * GB
    if total_thr > 0:
        if total >= total_thr and not st.total_alerted:
            st.total_alerted = True
            crossed.append("total")
            reasons.append(f"its storage reached {si(total)} (threshold {si(total_thr)})")
        elif total < total_thr * s.rearm_factor:
            st.total_alerted = False
    recl_thr = s.disk_reclaimable_gb * GB
    if recl_thr > 0:
        if reclaimable >= recl_thr and not st.reclaimable_alerted:
            st.reclaimable_alerted = True
            crossed.append("reclaimable")
            reasons.append(f"{si(reclaimable)} could be reclaimed (threshold "
                           f"{si(recl_thr)})")
        elif reclaimable < recl_thr * s.rearm_factor:
            st.reclaimable_alerted = False
    return crossed


def _changes(s: ContainersSettings, st: DiskState, sizes: dict[str, int],
             reasons: list[str]) -> list[str]:
    """The kinds whose size changed enough since the last report."""
    changed: list[str] = []
    if st.baseline is None:
        st.baseline = sizes  # the first look: what later changes are measured against
        return changed
    if s.disk_change_fraction <= 0:
        return changed
    for kind in DF_ORDER:
        if kind not in sizes:
            continue
        before, now = st.baseline.get(kind, 0), sizes[kind]
        delta = now - before
        if abs(delta) >= max(s.disk_change_fraction * before, s.disk_min_change_gb * GB, 1):
            changed.append(kind)
            verb = "grew" if delta > 0 else "shrank"
            reasons.append(f"{DF_NAMES[kind]} {verb} from {si(before)} to {si(now)}")
    return changed


def disk_check(ctx: EventContext, source: str, s: ContainersSettings, st: DiskState,
               engine: str, rows: list[DiskRow]) -> MemoryEvent | None:
    """One engine's `system df` rows → an event when a threshold is crossed or a kind's
    size changed enough since the last report, else None."""
    by_kind = _by_kind(rows)
    total = sum(r.size for r in by_kind.values())
    reclaimable = sum(r.reclaimable for r in by_kind.values())
    reasons: list[str] = []
    crossed = _crossings(s, st, total, reclaimable, reasons)
    sizes = {k: r.size for k, r in by_kind.items()}
    changed = _changes(s, st, sizes, reasons)
    if not reasons:
        return None
    st.baseline = sizes
    cli = engine  # what one types: the advice names the command, not the configured path
    advice = [f"{si(r.reclaimable)} of {DF_WORDS[k]} reclaimable "
              f"({PRUNE[k].format(cli=cli)})"
              for k in DF_ORDER
              if k in by_kind and (r := by_kind[k]).reclaimable >= CONTAINER_DISK_ADVISED_BYTES]
    reclaim_text = "; ".join(advice) if advice else "nothing reclaimable"
    summary = (f"{engine} container storage: " + "; ".join(reasons) + f" — {reclaim_text}; "
               f"{si(total)} in all")
    lines = [f"{engine} container storage uses {si(total)}, {si(reclaimable)} of it "
             "reclaimable.", *(f"- {r}" for r in reasons), ""]
    for k in DF_ORDER:
        if k not in by_kind:
            continue
        r = by_kind[k]
        lines.append(f"{k.replace('_', ' ')}: {r.count} ({r.active} in use), {si(r.size)}, "
                     f"{si(r.reclaimable)} reclaimable: {PRUNE[k].format(cli=cli)}")
    lines += ["", "The watcher only advises: it never deletes anything. `image prune -a` "
              "removes every image no container uses (without -a: only dangling ones).",
              f"host: {ctx.hostname}"]
    extra: dict[str, Any] = {"engine": engine, "total_bytes": total,
                             "reclaimable_bytes": reclaimable, "reasons": crossed + changed}
    for k, r in by_kind.items():
        extra[f"{k}_bytes"] = r.size
        extra[f"{k}_reclaimable_bytes"] = r.reclaimable
        extra[f"{k}_count"] = r.count
        extra[f"{k}_active"] = r.active
    if crossed:
        extra["threshold_bytes"] = {"total": int(s.disk_total_gb * GB),
                                    "reclaimable": int(s.disk_reclaimable_gb * GB)}
    return ctx.event(source, CATEGORY, "disk", summary, detail="\n".join(lines),
                     severity=Severity.WARNING if crossed else Severity.INFO,
                     tags=["container", engine, "disk"], **extra)
