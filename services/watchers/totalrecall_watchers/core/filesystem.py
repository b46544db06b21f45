"""Filesystem watcher: inotify (via watchfiles) on configured paths.

Skips temp/editor files, VCS internals and build output; repeated changes of one path within
`coalesce_s` become one event. A new directory's entries are read when it appears: what was
made in it before the watch reached it is never notified. As root, a created or modified file's
event says which process, user and command wrote it (`file_actors.py`, fanotify; best effort:
not for deletions).
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from totalrecall_schema import MemoryEvent

from .base import Emit, EventContext, Unavailable, Watcher, human_bytes
from .file_actors import FileActors

if TYPE_CHECKING:
    from ..settings import FilesystemSettings

KIND = {1: "create", 2: "modify", 3: "delete"}  # watchfiles.Change values
VERB = {"create": "Created", "modify": "Modified", "delete": "Deleted"}
MAX_COALESCE_KEYS = 10_000
#: A new directory's entries read at most (`FileChangeTracker.batch`).
MAX_NEW_DIR_ENTRIES = 1_000


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


class FileChangeTracker:
    """Pure: batches of (change, path) → events, with coalescing per path."""

    def __init__(self, ctx: EventContext, path_filter: PathFilter, coalesce_s: float,
                 source: str = "filesystem", actors: FileActors | None = None) -> None:
        self.ctx = ctx
        #: Who wrote a file (None: not known here).
        self.actors = actors
        self.filter = path_filter
        self.coalesce_s = coalesce_s
        self.source = source
        self._last: OrderedDict[tuple[str, str], float] = OrderedDict()
        self.coalesced = 0
        self.filtered = 0

    def batch(self, changes: set[tuple[int, str]]) -> list[MemoryEvent]:
        by_path: dict[str, set[str]] = {}
        for change, path in changes:
            kind = KIND.get(int(change))
            if kind is None:
                continue
            if not self.filter.keep(path):
                self.filtered += 1
                continue
            by_path.setdefault(path, set()).add(kind)
        for path in [p for p, kinds in by_path.items() if "create" in kinds]:
            if self.actors is not None and os.path.isdir(path):
                self.actors.mark(path)  # its files' writers too, from now on
            for entry in self._entries_of_new_dir(path):
                by_path.setdefault(entry, {"create"})
        events: list[MemoryEvent] = []
        now = self.ctx.clock.monotonic()
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
                events.append(self._event(kind, path))
        return events

    def _entries_of_new_dir(self, path: str) -> list[str]:
        """What a directory just created already holds. Its entries made before the recursive
        watch reached it (`pip install --target`, `tar x`, a moved-in tree) are never notified:
        they are read here instead, at most `MAX_NEW_DIR_ENTRIES` of them."""
        if not os.path.isdir(path) or os.path.islink(path):
            return []
        found: list[str] = []
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in sorted(dirs) if self.filter.keep(os.path.join(root, d))]
            for name in [*dirs, *sorted(files)]:
                entry = os.path.join(root, name)
                if self.filter.keep(entry):
                    found.append(entry)
                if len(found) >= MAX_NEW_DIR_ENTRIES:
                    return found
        return found

    def _event(self, kind: str, path: str) -> MemoryEvent:
        p = Path(path)
        lines = [f"path: {path}"]
        extra: dict[str, Any] = {}
        if kind != "delete":
            try:
                st = os.lstat(path)
                ftype = ("directory" if stat.S_ISDIR(st.st_mode) else
                         "symlink" if stat.S_ISLNK(st.st_mode) else "file")
                lines += [f"type: {ftype}", f"size: {human_bytes(st.st_size)}",
                          f"owner uid: {st.st_uid}", f"mode: {stat.filemode(st.st_mode)}"]
                extra = {"size_bytes": st.st_size, "file_type": ftype}
            except OSError:
                pass
        if p.suffix:
            lines.append(f"extension: {p.suffix}")
        tags = ["file", kind] + ([p.suffix.lstrip(".")] if p.suffix else [])
        summary = f"{VERB[kind]} {path}"
        writer = self.actors.writer_of(path) if self.actors is not None and kind != "delete" \
            else None
        if writer is not None:
            summary += f" by {writer.words()}"
            lines.append(f"changed by: {writer.words()}")
            if writer.cmdline:
                lines.append(f"command: {writer.cmdline}")
            extra["changed_by"] = writer.metadata()
        return self.ctx.event(self.source, "file", kind, summary,
                              detail="\n".join(lines), path=path, tags=tags, **extra)


class FilesystemWatcher(Watcher):
    name = "filesystem"

    def __init__(self, ctx: EventContext, settings: FilesystemSettings) -> None:
        super().__init__(ctx)
        self.settings = settings
        home = os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")
        self.filter = PathFilter(settings.ignore_dirs, settings.ignore_suffixes,
                                 roots=list(settings.paths),
                                 ignore_paths=[*settings.ignore_paths,
                                               os.path.realpath(os.path.expanduser(home))])
        self.tracker = FileChangeTracker(ctx, self.filter, settings.coalesce_s, self.name)
        #: Whether a file event can say who wrote it (shown in /health).
        self.writers_note: str | None = None

    def _paths(self) -> tuple[list[str], list[str]]:
        present = [p for p in self.settings.paths if os.path.exists(p)]
        missing = [p for p in self.settings.paths if not os.path.exists(p)]
        return present, missing

    def check_available(self) -> str | None:
        present, missing = self._paths()
        if not present:
            return "none of the configured paths exist: " + (", ".join(missing) or "(none set)")
        notes = [("not watched (missing): " + ", ".join(missing)) if missing else None,
                 self.writers_note]
        self.note = "; ".join(n for n in notes if n) or None
        return None

    def stats(self) -> dict[str, int]:
        out = {"coalesced": self.tracker.coalesced, "filtered": self.tracker.filtered}
        if self.tracker.actors is not None:
            out["writer_events"] = self.tracker.actors.events
        return out

    async def _start_actors(self, roots: list[str]) -> None:
        if not self.settings.writers:
            return
        actors = FileActors(max_dirs=self.settings.writers_max_dirs)
        try:
            await asyncio.to_thread(actors.start, roots)
        except Unavailable as exc:
            self.writers_note = f"who changed a file is not known here: {exc}"
            self.note = "; ".join(n for n in (self.note, self.writers_note) if n)
            return
        self.tracker.actors = actors
        self.writers_note = (f"writers known (fanotify) in {len(actors.marked)} directories; "
                             "not for deletions")
        self.note = "; ".join(n for n in (self.note, self.writers_note) if n)

    async def run(self, emit: Emit, stop: asyncio.Event) -> None:
        present, _ = self._paths()
        if not present:
            raise Unavailable("none of the configured paths exist")
        await self._start_actors(present)
        try:
            await self._watch(present, emit, stop)
        finally:
            if self.tracker.actors is not None:
                await asyncio.to_thread(self.tracker.actors.stop)
                self.tracker.actors = None

    async def _watch(self, present: list[str], emit: Emit, stop: asyncio.Event) -> None:
        import watchfiles

        async for changes in watchfiles.awatch(
                *present, watch_filter=self.filter, stop_event=stop,
                debounce=self.settings.debounce_ms, step=50,
                force_polling=self.settings.force_polling or None, recursive=True,
                ignore_permission_denied=True):
            for event in self.tracker.batch({(int(c), p) for c, p in changes}):
                await emit(event)
