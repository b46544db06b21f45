"""The in-memory cache of query vectors: an agent asks the same questions again, and a query's
vector depends only on its text and the model."""

from __future__ import annotations

import threading
from collections import OrderedDict


class QueryLRU:
    """Small in-memory LRU of query vectors, keyed by (model fingerprint, text); thread-safe."""

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._d: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._d)

    def get(self, model: str, text: str) -> list[float] | None:
        with self._lock:
            v = self._d.get((model, text))
            if v is not None:
                self._d.move_to_end((model, text))
            return v

    def put(self, model: str, text: str, vec: list[float]) -> None:
        if self.max_entries <= 0:
            return
        with self._lock:
            self._d[(model, text)] = vec
            self._d.move_to_end((model, text))
            while len(self._d) > self.max_entries:
                self._d.popitem(last=False)
