"""Ingest yields to recall: while vector searches are being answered, writing takes at most a
share of the wall time.

An HNSW build holds its tier's writes for seconds, and the events that arrive meanwhile wait
in the stream. Written as fast as they can be once the build is done, they take the CPU that
the recalls of that moment need (Postgres's inserts and the indexer's own work, on the same
cores). Recall latency then rises for a few seconds after every build
(docs/perf/2026-11-28-ingest-pacing.md). A backlog after a restart or an outage does the same.

So, while a search was answered within the last `active_s` seconds, a batch that took `t`
seconds is followed by a pause of `t * (1 - duty) / duty` (at most `max_pause_s`). A backlog
then drains at `duty` of full speed, spread over time. With no recall being served it drains at
full speed. Steady ingest is paced too, but a pause there only makes the next batch larger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class IngestPacer:
    #: The share of the wall time ingest may take while recall is served (1: never pause).
    duty: float = 0.5
    #: A search answered this recently means recall is being served.
    active_s: float = 2.0
    #: The longest pause after one batch. A batch that waited on a build took long without
    #: using the CPU, so its time says little about the work.
    max_pause_s: float = 0.5
    _last_search: float = -math.inf

    def __post_init__(self) -> None:
        if not 0 < self.duty <= 1:
            raise ValueError(f"duty must be in (0, 1], not {self.duty}")

    def searched(self, now: float) -> None:
        """A vector search was answered at `now` (a monotonic clock)."""
        self._last_search = now

    def pause_after(self, took_s: float, now: float) -> float:
        """Seconds to wait after a batch that took `took_s`, at `now` (the same clock)."""
        if self.duty >= 1 or took_s <= 0 or now - self._last_search > self.active_s:
            return 0.0
        return min(took_s * (1 - self.duty) / self.duty, self.max_pause_s)
