"""Where a memory lives in the Markdown ground truth: OpenClaw-style path + line range citations.

Reads the indexer's daily logs (read-only). A record starts at its `## ` heading, whose next line
is the `<!-- tr:event {...} -->` comment, and runs until the next record.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

_MARK = "<!-- tr:event "


@dataclass
class _FileIndex:
    stamp: tuple[float, int]
    spans: dict[tuple[str, str], tuple[int, int]]  # (namespace, id) -> 1-based line range


@dataclass
class Citations:
    memory_dir: Path
    _cache: dict[Path, _FileIndex] = field(default_factory=dict)

    def daily_path(self, day: str) -> Path:
        return self.memory_dir / "daily" / f"{day}.md"

    def _index(self, path: Path) -> dict[tuple[str, str], tuple[int, int]]:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return {}
        stamp = (st.st_mtime, st.st_size)
        cached = self._cache.get(path)
        if cached is not None and cached.stamp == stamp:
            return cached.spans
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        starts: list[tuple[int, tuple[str, str]]] = []
        for i in range(len(lines) - 1):
            if lines[i].startswith("## ") and lines[i + 1].startswith(_MARK):
                raw = lines[i + 1][len(_MARK):].rsplit("-->", 1)[0]
                try:
                    ev = json.loads(raw)["event"]
                    starts.append((i + 1, (ev.get("namespace", "default"), ev["id"])))
                except (ValueError, KeyError, TypeError):
                    continue
        spans: dict[tuple[str, str], tuple[int, int]] = {}
        for n, (line, key) in enumerate(starts):
            end = starts[n + 1][0] - 1 if n + 1 < len(starts) else len(lines)
            while end > line and not lines[end - 1].strip():
                end -= 1
            spans[key] = (line, end)
        self._cache[path] = _FileIndex(stamp, spans)
        return spans

    def locate(self, namespace: str, memory_id: str, day: str) -> tuple[str, int, int]:
        """(relative path, start line, end line); lines are 0 when the record is not found."""
        path = self.daily_path(day)
        start, end = self._index(path).get((namespace, memory_id), (0, 0))
        return f"memory/daily/{day}.md", start, end
