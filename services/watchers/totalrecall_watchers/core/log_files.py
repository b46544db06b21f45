"""Text log files as a source of the journal watcher: their lines as journal entries (the files
are followed by `adapters/log_tail.py`'s `LogTail`).

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
import re
from typing import Any

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
