"""A process that has ended no longer answers a question about now.

"What's using my CPU right now?" matches every `high_cpu` event ever recorded; one whose process
has since exited (a later `exit`/`crash`/`oom_kill` event for the same PID and process name) is
history, not the answer. For questions about the present such memories keep only `factor` of
their score, so the still-running process ranks above them; other questions ("what happened to
PID 4242?") are left alone, since there the ended process is the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from .fusion import Candidate

_NOW = re.compile(r"(?i)\b(?:now|right now|currently|current|at the moment|at present|"
                  r"still|is (?:\w+ )?(?:using|eating|hogging|burning)|are (?:\w+ )?using)\b")
#: what a process's own state was: superseded once it ended
STATE_SUBCATEGORIES = frozenset({"high_cpu", "high_mem"})
END_SUBCATEGORIES = frozenset({"exit", "crash", "oom_kill"})


class ProcessRow(Protocol):
    timestamp: datetime
    category: str
    subcategory: str
    metadata: dict[str, Any]


def asks_about_now(query: str) -> bool:
    return bool(_NOW.search(query))


def _ident(m: ProcessRow) -> tuple[int, str] | None:
    pid = m.metadata.get("pid")
    if m.category != "system.process" or not isinstance(pid, int):
        return None
    return pid, str(m.metadata.get("process") or "")


def ends(rows: Iterable[ProcessRow]) -> dict[tuple[int, str], datetime]:
    """(pid, process name) → when it last ended, from the end events among `rows`."""
    out: dict[tuple[int, str], datetime] = {}
    for m in rows:
        ident = _ident(m)
        if ident is None or m.subcategory not in END_SUBCATEGORIES:
            continue
        if ident not in out or out[ident] < m.timestamp:
            out[ident] = m.timestamp
    return out


def _ended(ident: tuple[int, str], at: datetime,
           ended: Mapping[tuple[int, str], datetime]) -> bool:
    pid, name = ident
    for (epid, ename), when in ended.items():
        # A name on either side that disagrees is another process that reused the PID.
        if epid == pid and (not name or not ename or name == ename) and when >= at:
            return True
    return False


def supersede_ended(ranked: Sequence[Candidate], rows: Mapping[str, ProcessRow],
                    ended: Mapping[tuple[int, str], datetime], factor: float) -> list[Candidate]:
    """`ranked` with the state events of ended processes scaled by `factor`, re-sorted."""
    out = list(ranked)
    for c in out:
        m = rows.get(c.key)
        if m is None or m.subcategory not in STATE_SUBCATEGORIES:
            continue
        ident = _ident(m)
        if ident is not None and _ended(ident, m.timestamp, ended):
            cut = c.score * (1.0 - factor)
            c.components["superseded"] = -cut
            c.score -= cut
    out.sort(key=lambda c: c.score, reverse=True)
    return out
