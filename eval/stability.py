"""The first questions of a run asked again at its end.

Nothing is ingested between the two asks, and a question asked at its dataset's date (`asOf`)
is ranked deterministically by one stack: a ranking that changed is state that was not settled
when the questions began (a cache kept from before the load, an index still catching up). Such
a run differs from a rerun by more than its questions' noise says, so every run reports how
many of its first rankings held.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

#: How many of a run's first questions are asked again: the first ones, asked closest to the
#: load, are the ones an unsettled state would reach.
ASK_AGAIN = 20
#: The second ask comes at least this long after the first question: within the recall API's
#: longest reuse of what it read for a search (word counts, `TERM_STATS_MAX_AGE_S` = 10 s), a
#: value kept from before the load would answer both asks alike.
AGAIN_AFTER_S = 12.0


class _Recalls(Protocol):
    def recall(self, query: str, namespace: str, max_results: int = 10,
               timeframe: str = "all", as_of: datetime | None = None,
               ) -> tuple[list[dict[str, Any]], float, dict[str, Any]]: ...


@dataclass(frozen=True)
class Asked:
    query: str
    namespace: str
    as_of: datetime | None
    #: the memories' ids as the recall ranked them
    ids: tuple[str, ...]


def ids_of(memories: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(str(m.get("id", "")) for m in memories)


def ask_again(client: _Recalls, asked: Sequence[Asked], max_results: int,
              log: Callable[[str], None] = print, not_before: float = 0.0,
              clock: Callable[[], float] = time.perf_counter,
              sleep: Callable[[float], None] = time.sleep) -> dict[str, int]:
    """→ {"asked_again": n, "same_ranking": m} for the first `ASK_AGAIN` of `asked`, asked
    again no earlier than `not_before` (on `clock`)."""
    first = list(asked[:ASK_AGAIN])
    if first and clock() < not_before:
        sleep(not_before - clock())
    same = 0
    for a in first:
        mems, _ms, _body = client.recall(a.query, a.namespace, max_results=max_results,
                                         as_of=a.as_of)
        same += ids_of(mems) == a.ids
    if same < len(first):
        log(f"  WARNING: {len(first) - same} of the first {len(first)} questions ranked "
            "otherwise when asked again at the end: the run began before the stack settled")
    return {"asked_again": len(first), "same_ranking": same}
