"""Where a memory lives in the Markdown ground truth: OpenClaw-style path + line range citations,
and a daily log as one namespace may read it.

Reads the indexer's daily logs (read-only). A record starts at its `## ` heading, whose next line
is the `<!-- tr:event {...} -->` comment, and runs until the next record (a memory, a
`tr:seen` or a `tr:forgotten` line). Like the indexer's parser, lines inside fenced blocks are
never taken for records, so a memory whose detail imitates a record of another namespace can
neither move a citation nor unmask that namespace's text.

A daily log holds every namespace. `scoped_text` blanks each line that does not belong to the
reader's namespaces (another namespace's memory, a `seen` line of one, a `forgotten` audit line
naming memories not provably theirs) to an empty line: line numbers stay those of the file, so
citations keep pointing at the right lines, and nothing of another namespace is returned.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from totalrecall_schema import memory_key

_TAGS = (("<!-- tr:event ", "event"), ("<!-- tr:seen ", "seen"),
         ("<!-- tr:forgotten ", "forgotten"))
_END = " -->"
_FENCE_RE = re.compile(r"^(`{3,}|~{3,})")
#: The indexer's file header (`# Memory log — YYYY-MM-DD`): the only text outside records kept.
_HEADER_RE = re.compile(r"^# Memory log — \d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class _Block:
    """Lines `start`..`end` (0-based, inclusive) of a daily file."""

    start: int
    end: int
    kind: str  # "text" (before the first record) | "event" | "seen" | "forgotten"
    namespace: str | None = None  # event blocks
    memory_id: str | None = None  # event blocks
    payload: dict[str, Any] | None = None


def _record(line: str) -> tuple[str, dict[str, Any]] | None:
    for tag, kind in _TAGS:
        if line.startswith(tag) and line.endswith(_END):
            try:
                payload = json.loads(line[len(tag): -len(_END)])
            except ValueError:
                return None
            return (kind, payload) if isinstance(payload, dict) else None
    return None


def _blocks(lines: list[str]) -> list[_Block]:
    """Split a daily file's lines into blocks; fenced content is never interpreted."""
    heads: list[tuple[int, str, dict[str, Any]]] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        if fence is not None:
            fence = None if line == fence else fence
            continue
        m = _FENCE_RE.match(line)
        if m:
            fence = m.group(1)
            continue
        rec = _record(line)
        if rec is not None:
            # The `## ` heading right above a record line is part of it (it cannot be fenced:
            # a fenced line is followed by a non-fenced one only at the closing fence).
            start = i - 1 if i > 0 and lines[i - 1].startswith("## ") else i
            heads.append((start, *rec))
    out: list[_Block] = []
    if not heads or heads[0][0] > 0:
        out.append(_Block(0, (heads[0][0] if heads else len(lines)) - 1, "text"))
    for n, (start, kind, payload) in enumerate(heads):
        end = (heads[n + 1][0] if n + 1 < len(heads) else len(lines)) - 1
        ns = mid = None
        if kind == "event":
            ev = payload.get("event")
            if isinstance(ev, dict) and isinstance(ev.get("id"), str):
                ns, mid = str(ev.get("namespace") or "default"), ev["id"]
        out.append(_Block(start, end, kind, ns, mid, payload))
    return out


def _readable(blocks: list[_Block], namespaces: Collection[str]) -> list[_Block]:
    """The blocks a reader of these namespaces may see."""
    own = {memory_key(b.namespace, b.memory_id) for b in blocks
           if b.kind == "event" and b.namespace in namespaces and b.memory_id is not None}

    def visible(b: _Block) -> bool:
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
    for b in _readable(_blocks(lines), namespaces):
        for i in range(b.start, b.end + 1):
            # Outside records only the indexer's header (and blank lines) are shown.
            visible[i] = b.kind != "text" or bool(_HEADER_RE.match(lines[i]))
    out = "\n".join(line if show else "" for line, show in zip(lines, visible, strict=True))
    return out + "\n" if lines else ""


def _spans(lines: list[str]) -> dict[tuple[str, str], tuple[int, int]]:
    """(namespace, id) -> 1-based line range of each memory's record, trailing blanks left out."""
    spans: dict[tuple[str, str], tuple[int, int]] = {}
    for b in _blocks(lines):
        if b.kind != "event" or b.namespace is None or b.memory_id is None:
            continue
        end = b.end
        while end > b.start and not lines[end].strip():
            end -= 1
        # The first record of a key is the memory, as for the indexer's parser.
        spans.setdefault((b.namespace, b.memory_id), (b.start + 1, end + 1))
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
        spans = _spans(path.read_text(encoding="utf-8", errors="replace").splitlines())
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
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return None
        span = _spans(lines).get((namespace, memory_id))
        if span is None:
            return None
        start, end = span
        return Source(f"memory/daily/{day}.md", start, end, "\n".join(lines[start - 1:end]) + "\n")
