"""Resident memory of a system = the PSS of every process of its tree, from /proc.

PSS (proportional set size), not RSS: Postgres' backends share its buffers and a forked worker
shares its parent's pages, and RSS would count those once per process.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def rollup_kb(smaps_rollup: str, field: str) -> int:
    """The `field:` line (`Pss`, `Anonymous`, …) of /proc/<pid>/smaps_rollup, in kB (0 when
    absent)."""
    for line in smaps_rollup.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def parse_pss_kb(smaps_rollup: str) -> int:
    """The `Pss:` line of /proc/<pid>/smaps_rollup, in kB (0 when absent)."""
    return rollup_kb(smaps_rollup, "Pss")


def children(pid: int, proc: Path = PROC) -> list[int]:
    """Direct children of `pid` (over all its threads)."""
    out: list[int] = []
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def tree(roots: Iterable[int], proc: Path = PROC) -> list[int]:
    """`roots` and all their descendants, each once."""
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo += children(pid, proc)
    return seen


def pss_mib(roots: Iterable[int], proc: Path = PROC) -> float:
    """PSS of the process trees under `roots`, in MiB (processes gone meanwhile count 0)."""
    kb = 0
    for pid in tree(roots, proc):
        try:
            kb += parse_pss_kb((proc / str(pid) / "smaps_rollup").read_text())
        except OSError:
            continue
    return kb / 1024
