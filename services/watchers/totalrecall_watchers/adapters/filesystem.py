"""The filesystem watcher: inotify (via watchfiles) on the configured paths, a new directory's
entries read when it appears (what was made in it before the watch reached it is never
notified), each changed file's type and size, and, as root, its writer
(`adapters/file_actors.py`). `core/filesystem.py` filters, coalesces and writes the events."""

from __future__ import annotations

import asyncio
import os
import stat
from typing import TYPE_CHECKING

from totalrecall_schema import MemoryEvent

from ..core.base import Emit, EventContext, Unavailable, Watcher
from ..core.filesystem import KIND, Coalescer, FileInfo, PathFilter, Writers, file_event
from .file_actors import FileActors

if TYPE_CHECKING:
    from ..settings import FilesystemSettings

#: A new directory's entries read at most (`FileChangeTracker.batch`).
MAX_NEW_DIR_ENTRIES = 1_000


class FileChangeTracker:
    """Batches of (change, path) → events, with coalescing per path."""

    def __init__(self, ctx: EventContext, path_filter: PathFilter, coalesce_s: float,
                 source: str = "filesystem", actors: Writers | None = None) -> None:
        self.ctx = ctx
        #: Who wrote a file (None: not known here).
        self.actors = actors
        self.filter = path_filter
        self.coalescer = Coalescer(coalesce_s)
        self.source = source
        self.filtered = 0

    @property
    def coalesced(self) -> int:
        return self.coalescer.coalesced

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
        due = self.coalescer.due(by_path, self.ctx.clock.monotonic())
        return [self._event(kind, path) for kind, path in due]

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
        info: FileInfo | None = None
        if kind != "delete":
            try:
                st = os.lstat(path)
                info = FileInfo("directory" if stat.S_ISDIR(st.st_mode) else
                                "symlink" if stat.S_ISLNK(st.st_mode) else "file",
                                st.st_size, st.st_uid, stat.filemode(st.st_mode))
            except OSError:
                pass
        writer = self.actors.writer_of(path) if self.actors is not None and kind != "delete" \
            else None
        return file_event(self.ctx, self.source, kind, path, info, writer)


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
        #: fanotify's writers, while it runs (also the tracker's `actors`).
        self.actors: FileActors | None = None
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
        if self.actors is not None:
            out["writer_events"] = self.actors.events
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
        self.tracker.actors = self.actors = actors
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
            if self.actors is not None:
                await asyncio.to_thread(self.actors.stop)
                self.tracker.actors = self.actors = None

    async def _watch(self, present: list[str], emit: Emit, stop: asyncio.Event) -> None:
        import watchfiles

        async for changes in watchfiles.awatch(
                *present, watch_filter=self.filter, stop_event=stop,
                debounce=self.settings.debounce_ms, step=50,
                force_polling=self.settings.force_polling or None, recursive=True,
                ignore_permission_denied=True):
            for event in self.tracker.batch({(int(c), p) for c, p in changes}):
                await emit(event)
