"""Ends the process when a zvec call has hung.

zvec 0.8 can hang for good inside a call: queries of a tier waiting in zvec's query pool while
nothing else runs in zvec, 0 % CPU, seen under sustained load even with writes and builds kept
apart from searches (`build_exclusion.py`). Such a process never recovers by itself, and every
later search and write of the tier queues behind the hung call. A call in flight for longer than
its limit therefore ends the process (exit 70, EX_SOFTWARE) so that its supervisor restarts it:
the indexer is crash-safe (JetStream redelivers what was not acked; Markdown, Postgres and Zvec
are checked and repaired at start), so a hang costs a restart, not the pipeline.
HNSW builds have no limit: a large tier's build takes many minutes.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from totalrecall_worker import exit_process

log = logging.getLogger("totalrecall.indexer")


def _exit(kind: str, age_s: float) -> None:
    log.critical("a zvec %s has been stuck for %.0f s: zvec hung; exiting so that the "
                 "supervisor restarts the indexer (nothing is lost: unacked events are "
                 "redelivered)", kind, age_s)
    exit_process()


class ZvecWatchdog:
    def __init__(self, limit_s: float, on_stall: Callable[[str, float], None] = _exit,
                 every_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit_s, self.every_s = limit_s, every_s
        self._on_stall, self._clock = on_stall, clock
        self._lock = threading.Lock()
        self._calls: dict[int, tuple[str, float]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    @contextmanager
    def call(self, kind: str) -> Iterator[None]:
        """Watch the body, a zvec `kind` ("query", "write", …) that must not outlast the limit."""
        cid = next(self._ids)
        with self._lock:
            self._calls[cid] = (kind, self._clock())
        try:
            yield
        finally:
            with self._lock:
                del self._calls[cid]

    def stalled(self) -> list[tuple[str, float]]:
        """The calls in flight for longer than the limit: (kind, seconds)."""
        now = self._clock()
        with self._lock:
            ages = [(kind, now - t0) for kind, t0 in self._calls.values()]
        return [(kind, age) for kind, age in ages if age > self.limit_s]

    def check(self) -> bool:
        found = self.stalled()
        if found:
            kind, age = max(found, key=lambda x: x[1])
            self._on_stall(kind, age)
        return bool(found)

    def start(self) -> None:
        """Check every `every_s` seconds on a daemon thread (no limit: never started)."""
        if self.limit_s <= 0 or self._thread is not None:
            return

        def run() -> None:
            while True:
                time.sleep(self.every_s)
                self.check()

        self._thread = threading.Thread(target=run, name="zvec-watchdog", daemon=True)
        self._thread.start()
