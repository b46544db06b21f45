"""The progress of a rebuild as people see it: a tqdm bar on a terminal, a line per phase (or
every ~2 s) otherwise, or nothing; fed the indexer's progress dicts, wherever the rebuild runs."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, ClassVar


class Progress:
    """Renders progress dicts (`{"phase", "done", "total", "elapsed_s", "finished"}`):
    a tqdm bar (`bar`), one line per phase / ~2 s (`plain`), or nothing (`none`)."""

    PHASES: ClassVar[dict[str, str]] = {
        "read": "reading logs", "index": "re-indexing", "memory_md": "MEMORY.md",
        "optimize": "building HNSW", "done": "done", "failed": "failed"}

    def __init__(self, mode: str = "auto", stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if getattr(self.stream, "isatty", lambda: False)() else "plain"
        self.mode = mode
        self.bar: Any = None
        self.phase: str | None = None
        self.last_line = 0.0
        self.last: dict[str, Any] | None = None
        self.lock = threading.Lock()

    def update(self, p: dict[str, Any]) -> None:
        with self.lock:
            self._update(p)

    def _update(self, p: dict[str, Any]) -> None:
        self.last = p
        phase = str(p.get("phase", ""))
        done, total = int(p.get("done") or 0), int(p.get("total") or 0)
        label = self.PHASES.get(phase, phase)
        if self.mode == "bar":
            if self.bar is None and total:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="mem", file=self.stream, dynamic_ncols=True,
                                desc=label)
            if self.bar is not None:
                if total and self.bar.total != total:
                    self.bar.total = total
                self.bar.set_description(label, refresh=False)
                self.bar.n = min(done, self.bar.total or done)
                self.bar.refresh()
        elif self.mode == "plain":
            now = time.monotonic()
            if phase != self.phase or now - self.last_line >= 2.0 or p.get("finished"):
                pct = f" ({100 * done / total:.0f}%)" if total else ""
                print(f"rebuild: {label} {done}/{total}{pct} {float(p.get('elapsed_s') or 0):.1f}s",
                      file=self.stream, flush=True)
                self.last_line = now
        self.phase = phase

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

