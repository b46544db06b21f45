"""Filesystem changes: which paths count (`PathFilter`), when a change is news (`Coalescer`),
and the event (`file_event`).

Skips temp/editor files, VCS internals and build output; repeated changes of one path within
`coalesce_s` become one event. `adapters/filesystem.py` is the watcher (inotify via watchfiles,
reading a new directory's entries and each file's type and size) and, as root, a created or
modified file's event says which process, user and command wrote it (`adapters/file_actors.py`,
fanotify; best effort: not for deletions).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from totalrecall_schema import MemoryEvent

from .base import EventContext, human_bytes
from .file_actors import Writer

KIND = {1: "create", 2: "modify", 3: "delete"}  # watchfiles.Change values
VERB = {"create": "Created", "modify": "Modified", "delete": "Deleted"}
MAX_COALESCE_KEYS = 10_000


class Writers(Protocol):
    """Who wrote a file lately (`adapters/file_actors.FileActors`)."""

    def writer_of(self, path: str) -> Writer | None: ...

    def mark(self, directory: str) -> bool: ...


class PathFilter:
    def __init__(self, ignore_dirs: list[str], ignore_suffixes: list[str],
                 roots: list[str] | None = None, ignore_paths: list[str] | None = None) -> None:
        self.ignore_paths = [Path(p) for p in ignore_paths or []]
        self.dirs = set(ignore_dirs)
        self.suffixes = tuple(ignore_suffixes)
        self.roots = [Path(r) for r in roots or []]

    def __call__(self, change: object, path: str) -> bool:
        return self.keep(path)

    def keep(self, path: str) -> bool:
        p = Path(path)
        if any(p.is_relative_to(ig) for ig in self.ignore_paths):
            return False
        parts = p.parts
        for root in self.roots:  # only the part below a watched root counts
            if p.is_relative_to(root):
                parts = p.relative_to(root).parts
                break
        if any(part in self.dirs for part in parts):
            return False
        name = p.name
        if name.endswith(self.suffixes) or name.startswith((".#", "#", ".~")):
            return False
        if name.endswith("#") or name in {"4913", ".DS_Store"}:  # vim's write probe, macOS
            return False
        # Atomic-save temp names: .file.swp, file.tmp.1234, .goutputstream-XXXX
        return not (".tmp." in name or name.startswith(".goutputstream"))


class Coalescer:
    """Which changes of a batch are news: a path's repeated modifications within `coalesce_s`
    are one, and so is a file reported as created twice (read from its new directory, then
    notified as well)."""

    def __init__(self, coalesce_s: float) -> None:
        self.coalesce_s = coalesce_s
        self._last: OrderedDict[tuple[str, str], float] = OrderedDict()
        self.coalesced = 0

    def due(self, by_path: dict[str, set[str]], now: float) -> list[tuple[str, str]]:
        """(kind, path) to report, by path; `by_path`: each path's kinds of change."""
        out: list[tuple[str, str]] = []
        for path in sorted(by_path):
            kinds = by_path[path]
            if "create" in kinds:
                kinds.discard("modify")  # a new file's first write is part of its creation
            for kind in ("create", "modify", "delete"):
                if kind not in kinds:
                    continue
                key = (path, kind)
                last = self._last.get(key)
                if kind == "modify" and last is not None and now - last < self.coalesce_s:
                    self.coalesced += 1
                    continue
                if kind == "create" and last is not None and now - last < self.coalesce_s \
                        and self._last.get((path, "delete"), float("-inf")) < last:
                    # Reported already: read from its new directory, then notified as well.
                    self.coalesced += 1
                    continue
                self._last[key] = now
                self._last.move_to_end(key)
                while len(self._last) > MAX_COALESCE_KEYS:
                    self._last.popitem(last=False)
                out.append((kind, path))
        return out


@dataclass(frozen=True)
class FileInfo:
    """What `lstat` said of a changed path."""

    file_type: str  # "file", "directory" or "symlink"
    size: int
    uid: int
    mode: str  # `stat.filemode`: "-rw-r--r--"


def file_event(ctx: EventContext, source: str, kind: str, path: str, info: FileInfo | None,
               writer: Writer | None) -> MemoryEvent:
    p = Path(path)
    lines = [f"path: {path}"]
    extra: dict[str, Any] = {}
    if info is not None:
        lines += [f"type: {info.file_type}", f"size: {human_bytes(info.size)}",
                  f"owner uid: {info.uid}", f"mode: {info.mode}"]
        extra = {"size_bytes": info.size, "file_type": info.file_type}
    if p.suffix:
        lines.append(f"extension: {p.suffix}")
    tags = ["file", kind] + ([p.suffix.lstrip(".")] if p.suffix else [])
    summary = f"{VERB[kind]} {path}"
    if writer is not None:
        summary += f" by {writer.words()}"
        lines.append(f"changed by: {writer.words()}")
        if writer.cmdline:
            lines.append(f"command: {writer.cmdline}")
        extra["changed_by"] = writer.metadata()
    return ctx.event(source, "file", kind, summary, detail="\n".join(lines), path=path,
                     tags=tags, **extra)
