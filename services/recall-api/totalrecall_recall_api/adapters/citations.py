"""Where a memory lives in the Markdown ground truth: OpenClaw-style path + line range citations,
and a daily log as one namespace may read it.

Reads the indexer's daily logs (read-only) with the format's one reader,
`totalrecall_schema.daily_log.iter_blocks`: a record starts at its `## ` heading, whose next line
is the `<!-- tr:event {...} -->` comment, and runs until the next record (a memory, a `tr:seen`
or a `tr:forgotten` line). Lines inside fenced blocks are never taken for records, so a memory
whose detail imitates a record of another namespace can neither move a citation nor unmask that
namespace's text.

A daily log holds every namespace. `scoped_text` blanks each line that does not belong to the
reader's namespaces (another namespace's memory, a `seen` line of one, a `forgotten` audit line
naming memories not provably theirs) to an empty line: line numbers stay those of the file, so
citations keep pointing at the right lines, and nothing of another namespace is returned.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from totalrecall_schema import memory_key
from totalrecall_schema.daily_log import HEADER_RE, ParsedBlock, iter_blocks


def _readable(blocks: list[ParsedBlock], namespaces: Collection[str]) -> list[ParsedBlock]:
    """The blocks a reader of these namespaces may see."""
    own = {memory_key(b.namespace, b.memory_id) for b in blocks
           if b.kind == "event" and b.namespace in namespaces and b.memory_id is not None}

    def visible(b: ParsedBlock) -> bool:
        payload = b.payload or {}
        if b.kind == "event":
            return b.namespace in namespaces
        if b.kind == "seen":
            return payload.get("key") in own
        if b.kind == "forgotten":
            # The forgotten memories are gone from the file, so their namespace is only known
            # when every key is one of the reader's memories still here; otherwise hide it.
            keys = payload.get("keys")
            return isinstance(keys, list) and bool(keys) and all(k in own for k in keys)
        return True  # "text": filtered line by line in scoped_text

    return [b for b in blocks if visible(b)]


def scoped_text(text: str, namespaces: Collection[str]) -> str:
    """`text` (a daily log) with every line not readable by `namespaces` made empty."""
    lines = text.splitlines()
    visible = [False] * len(lines)
    for b in _readable(list(iter_blocks(text)), namespaces):
        for i in range(b.start, b.end + 1):
            # Outside records only the indexer's header (and blank lines) are shown.
            visible[i] = b.kind != "text" or bool(HEADER_RE.match(lines[i]))
    out = "\n".join(line if show else "" for line, show in zip(lines, visible, strict=True))
    return out + "\n" if lines else ""


def _spans(text: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(namespace, id) -> 1-based line range of each memory's record, trailing blanks left out."""
    spans: dict[tuple[str, str], tuple[int, int]] = {}
    for b in iter_blocks(text):
        if b.kind != "event" or b.namespace is None or b.memory_id is None:
            continue
        n = len(b.lines)
        while n > 1 and not b.lines[n - 1].strip():
            n -= 1
        # The first record of a key is the memory, as for `parse_daily`.
        spans.setdefault((b.namespace, b.memory_id), (b.start + 1, b.start + n))
    return spans


@dataclass(frozen=True)
class Source:
    """A memory's record in its daily log: the Markdown people read, with where it is."""

    path: str  # relative, as in citations: memory/daily/YYYY-MM-DD.md
    start_line: int  # 1-based, inclusive
    end_line: int
    text: str


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
        spans = _spans(path.read_text(encoding="utf-8", errors="replace"))
        self._cache[path] = _FileIndex(stamp, spans)
        return spans

    def locate(self, namespace: str, memory_id: str, day: str) -> tuple[str, int, int]:
        """(relative path, start line, end line); lines are 0 when the record is not found."""
        path = self.daily_path(day)
        start, end = self._index(path).get((namespace, memory_id), (0, 0))
        return f"memory/daily/{day}.md", start, end

    def source(self, namespace: str, memory_id: str, day: str) -> Source | None:
        """The Markdown record of one memory of `namespace` in the daily log of `day`; None
        when the log holds no such record (forgotten, or not written yet). Its lines are the
        memory's own block (heading, record comment, fields, fenced detail), nothing else."""
        path = self.daily_path(day)
        try:
            # One read: the span and the text come from the same bytes, even while the indexer
            # appends to or rewrites the file.
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None
        span = _spans(text).get((namespace, memory_id))
        if span is None:
            return None
        start, end = span
        lines = text.splitlines()[start - 1:end]
        return Source(f"memory/daily/{day}.md", start, end, "\n".join(lines) + "\n")
