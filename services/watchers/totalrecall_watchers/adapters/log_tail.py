"""`LogTail` follows one text log file like `tail -F`: it starts at the end of a file that exists
when the watcher starts (no replay of history), reads a file that appears later or is rotated
(new inode) or truncated from its beginning, and keeps a partial last line until its newline
arrives. `core/log_files.py` turns the lines into journal entries."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

MAX_READ = 1 << 20  # bytes per file per tick; the rest is read on the next ticks
MAX_LINE = 64 * 1024


class LogTail:
    """Follows one text file across rotation and truncation (the module docstring says how)."""

    def __init__(self, path: str | Path, *, application: bool) -> None:
        self.path = Path(path)
        self.application = application
        self.ident = self.path.stem or self.path.name
        self._f: Any = None
        self._ino: int | None = None
        self._buf = b""
        self._started = False
        self.lines = 0
        self.rotations = 0

    def available(self) -> bool:
        """The file exists, or (an application log) its directory does: it may appear."""
        return self.path.is_file() or (self.application and self.path.parent.is_dir())

    def _open(self, at_end: bool) -> None:
        self.close()
        f = open(self.path, "rb")  # noqa: SIM115 - kept open across reads
        st = os.fstat(f.fileno())
        if at_end:
            f.seek(0, os.SEEK_END)
        self._f, self._ino, self._buf = f, st.st_ino, b""

    def prime(self) -> None:
        """Remember where the file ends now: only lines written after this are read."""
        if not self._started:
            self.read_lines()

    def read_lines(self) -> list[str]:
        first = not self._started
        self._started = True
        try:
            st = os.stat(self.path)
        except OSError:
            self.close()  # gone (rotated away, not yet recreated): read the new one from its start
            return []
        try:
            if self._f is None:
                self._open(at_end=first)
            elif st.st_ino != self._ino:
                out = self._read()  # the rest of the old file first
                self.rotations += 1
                self._open(at_end=False)
                return out + self._read()
            elif st.st_size < self._f.tell():
                self.rotations += 1  # truncated (copytruncate)
                self._f.seek(0)
                self._buf = b""
            return self._read()
        except OSError:
            self.close()
            return []

    def _read(self) -> list[str]:
        data = self._f.read(MAX_READ)
        if not data:
            return []
        data = self._buf + data
        *lines, rest = data.split(b"\n")
        if len(rest) > MAX_LINE:
            lines.append(rest)
            rest = b""
        self._buf = rest
        self.lines += len(lines)
        return [ln.decode("utf-8", "replace") for ln in lines]

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
        self._f, self._ino = None, None
