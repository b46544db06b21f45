"""The figures a bench states against a target, machine-readably, beside the lines it prints.

A bench calls `emit(Ratio(...))` where it prints a ratio with its target (and `emit(Figure(...))`
for a figure that has none, such as a Server-Timing stage mean). `python -m bench` passes a file in
$TR_BENCH_RESULTS and each record is appended there as one JSON line; a bench run on its own prints
the same JSON on stdout after `bench-result: `, so its figures can still be read back.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

#: Where `python -m bench` wants the records of the bench it started.
ENV = "TR_BENCH_RESULTS"
#: What starts a record on stdout when no file is given.
PREFIX = "bench-result: "

Comparison = Literal["<=", ">="]


@dataclass(frozen=True)
class Ratio:
    """A ratio measured in one run, its target, and the raw figures it was made from."""

    name: str
    value: float
    target: float
    comparison: Comparison
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def met(self) -> bool:
        return self.value <= self.target if self.comparison == "<=" else self.value >= self.target

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "ratio", **asdict(self), "met": self.met}


@dataclass(frozen=True)
class Figure:
    """A figure without a target (a stage's mean, a throughput), kept with the ratios."""

    name: str
    value: float
    unit: str
    raw: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": "figure", **asdict(self)}


def emit(*records: Ratio | Figure) -> None:
    """Record each where `python -m bench` asked for it, else print it after PREFIX."""
    lines = [json.dumps(r.as_dict(), ensure_ascii=False) for r in records]
    if path := os.environ.get(ENV):
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    else:
        for line in lines:
            print(PREFIX + line, file=sys.stdout, flush=True)


def parse(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The records among `lines`: a results file's JSON lines, or a bench's stdout (only the lines
    after PREFIX count there; the rest is the bench's own text)."""
    out = []
    for line in lines:
        text = line.strip()
        if text.startswith(PREFIX):
            text = text[len(PREFIX):]
        elif not text.startswith("{"):
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("kind") in ("ratio", "figure") \
                and "name" in record and "value" in record:
            out.append(record)
    return out


def read(path: Path) -> list[dict[str, Any]]:
    """The records a bench appended to `path` (none when it wrote none)."""
    try:
        return parse(path.read_text(encoding="utf-8").splitlines())
    except FileNotFoundError:
        return []
