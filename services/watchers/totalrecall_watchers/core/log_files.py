"""Text log files as a source of the journal watcher: tail them, turn lines into journal entries.

`LogTail` follows one file like `tail -F`: it starts at the end of a file that exists when the
watcher starts (no replay of history), reads a file that appears later or is rotated (new inode)
or truncated from its beginning, and keeps a partial last line until its newline arrives.

`text_entry` turns one line into a journal-like entry (`MESSAGE`, `PRIORITY`,
`SYSLOG_IDENTIFIER`, `_PID`, `_TRANSPORT`) for `JournalParser.parse_entry`:

* syslog lines (`Jan  2 03:04:05 host ident[pid]: msg`, or an ISO timestamp first) give the
  identifier and PID, and a BSD one the host (`_HOSTNAME`: a file that gathers other machines'
  syslog); `kernel:` lines are kernel messages; `x.service: …` names the unit;
* the priority is an explicit level when the line has one (`ERROR`, `[WARN]`, `level=error`,
  JSON `"level": "error"`; `INFO` lines are then skipped), else error words (`error`, `failed`,
  `exception`, `traceback`, `segfault`, `fatal`, `panic`, …) or `warning`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

MAX_READ = 1 << 20  # bytes per file per tick; the rest is read on the next ticks
MAX_LINE = 64 * 1024

_TS = (r"(?:[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}"
       r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)")
#: A BSD syslog line's time: a host always follows it (after an ISO time, an application's own
#: log may have a level or a logger there instead).
_BSD_TIME = re.compile(r"^[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}\s")
_SYSLOG = re.compile(rf"^{_TS}\s+(?P<host>\S+)\s+(?P<ident>[^\s:\[\]]+)(?:\[(?P<pid>\d+)\])?:"
                     r"\s*(?P<msg>.*)$")
_LEADING_TS = re.compile(rf"^\s*\[?{_TS}\]?\s*")
_UNIT = re.compile(r"^([\w@.\\-]+\.(?:service|socket|timer|mount|scope|slice|target)): ")
LEVELS = {"emerg": 0, "emergency": 0, "alert": 1, "crit": 2, "critical": 2, "fatal": 2,
          "panic": 2, "err": 3, "error": 3, "eror": 3, "warn": 4, "warning": 4, "notice": 5,
          "info": 6, "information": 6, "debug": 7, "trace": 7}
_EXPLICIT = re.compile(
    r"(?:^|[\s\[(<|])(?:(?i:level|lvl|severity)[=:]\s*\"?(?P<kv>[A-Za-z]+)"
    r"|(?P<word>EMERG|ALERT|CRIT(?:ICAL)?|FATAL|PANIC|ERR(?:OR)?|WARN(?:ING)?|NOTICE|INFO|DEBUG"
    r"|TRACE))(?=[\"\])>:|\s,]|$)")
_KEYWORDS = [
    (2, re.compile(r"(?i)\b(?:fatal|panic|kernel panic|emergency)\b")),
    (3, re.compile(r"(?i)\b(?:error|errors? occurred|exception|traceback|segfault|"
                   r"segmentation fault|failed|failure|cannot|could not|unable to|"
                   r"permission denied|access denied|"
                   r"i/o error|oops)\b")),
    (4, re.compile(r"(?i)\b(?:warn|warning|deprecated)\b")),
]


def line_priority(message: str) -> int:
    """0 (emerg) … 7 (debug); 6 (info) when nothing says otherwise."""
    m = _EXPLICIT.search(message)
    if m:
        level = LEVELS.get((m.group("kv") or m.group("word") or "").lower())
        if level is not None:
            return level
    for prio, pattern in _KEYWORDS:
        if pattern.search(message):
            return prio
    return 6


def _json_entry(line: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    msg = next((str(obj[k]) for k in ("message", "msg", "MESSAGE", "error", "err") if obj.get(k)),
               None)
    if msg is None:
        return None
    level = next((str(obj[k]) for k in ("level", "severity", "lvl", "levelname", "log.level")
                  if obj.get(k) is not None), "")
    prio = LEVELS.get(level.lower()) if level and not level.isdigit() else (
        int(level) if level.isdigit() else None)
    entry: dict[str, Any] = {"MESSAGE": msg,
                             "PRIORITY": prio if prio is not None else line_priority(msg)}
    for k in ("logger", "name", "service", "app"):
        if obj.get(k):
            entry["SYSLOG_IDENTIFIER"] = str(obj[k])
            break
    return entry


def text_entry(line: str, default_ident: str) -> dict[str, Any] | None:
    """One text log line → a journal-like entry (None for a blank line)."""
    line = line.rstrip("\r\n")
    if not line.strip():
        return None
    if line.lstrip().startswith("{"):
        entry = _json_entry(line.strip())
        if entry is not None:
            entry.setdefault("SYSLOG_IDENTIFIER", default_ident)
            return entry
    m = _SYSLOG.match(line)
    entry = {}
    if m:
        msg = m.group("msg")
        ident = m.group("ident")
        entry["SYSLOG_IDENTIFIER"] = ident
        if _BSD_TIME.match(line):  # "Jan  2 03:04:05 host ident:": the host the line came from
            entry["_HOSTNAME"] = m.group("host")
        if m.group("pid"):
            entry["_PID"] = m.group("pid")
        if ident == "kernel":
            entry["_TRANSPORT"] = "kernel"
            msg = re.sub(r"^\[\s*\d+\.\d+\]\s*", "", msg)  # [  123.456789] uptime stamp
        unit = _UNIT.match(msg)
        if unit and (ident == "systemd" or ident.startswith("systemd")):
            entry["UNIT"] = unit.group(1)
    else:
        msg = _LEADING_TS.sub("", line)
        entry["SYSLOG_IDENTIFIER"] = default_ident
    entry["MESSAGE"] = msg
    entry["PRIORITY"] = line_priority(msg)
    return entry


class LogTail:
    """Follows one text file across rotation and truncation (see the module docstring)."""

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
