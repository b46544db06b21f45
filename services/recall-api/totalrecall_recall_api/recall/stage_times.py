"""Where one recall's time went, stage by stage, for its `Server-Timing` response header.

The stage histograms (`Metrics.stage_seconds`) tell how a stage behaves over many recalls;
they cannot tell which stage made one given recall slow. Each stage observed while a request
collects (`collecting`) is also added to that request's own tally, which the handler returns
as `Server-Timing: queue;dur=0.1, embed;dur=0.4, bm25;dur=6.2, …` (milliseconds; a stage that
ran more than once, as for each namespace of a request reading several, is summed).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[dict[str, float] | None] = ContextVar("recall_stage_times", default=None)


@contextmanager
def collecting() -> Iterator[dict[str, float]]:
    """Tally the stages observed inside (the tasks started inside share the tally)."""
    times: dict[str, float] = {}
    token = _current.set(times)
    try:
        yield times
    finally:
        _current.reset(token)


def add(stage: str, seconds: float) -> None:
    """Add to the current request's tally; nothing outside `collecting`."""
    times = _current.get()
    if times is not None:
        times[stage] = times.get(stage, 0.0) + seconds


def server_timing(times: dict[str, float]) -> str:
    """The tally as a `Server-Timing` header value (W3C Server Timing), in milliseconds."""
    return ", ".join(f"{stage.replace(' ', '_')};dur={1000 * s:.1f}" for stage, s in times.items())
