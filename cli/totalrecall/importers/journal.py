"""The systemd journal since a date: `journalctl -o json --since DATE`, or files of its output.

Each entry is one memory through the log-line mapping (`logs.py`): the text
`"<LEVEL> <identifier>[<pid>]: <MESSAGE>"` (LEVEL only for warnings and worse), category
`system.service`, source `journal` (the journal watcher's), `metadata.service` the unit (else the
identifier), the entry's `__REALTIME_TIMESTAMP`. Every priority is kept: this is history, and the
embedder folds exact repeats into one memory seen N times.

Ids: a hash of the entry's `__CURSOR` (unique and stable in a journal), so re-importing an
overlapping range adds nothing. Binary `MESSAGE`s (journald's byte arrays) are decoded as UTF-8.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .base import Item, Options, Skip, json_lines, make_event, stable_id
from .logs import LogRecord, log_event_fields

#: journald priorities → the level word in the text (info and below say nothing).
LEVELS = {0: "EMERG", 1: "ALERT", 2: "CRIT", 3: "ERROR", 4: "WARNING"}


class JournalUnavailable(RuntimeError):
    pass


def field(entry: dict[str, Any], name: str) -> str | None:
    v = entry.get(name)
    if v is None:
        return None
    if isinstance(v, list):  # binary fields come as byte arrays; repeated fields as lists
        if v and all(isinstance(b, int) for b in v):
            return bytes(v).decode("utf-8", "replace")
        v = v[0] if v else ""
    return str(v)


def entry_event(entry: dict[str, Any], namespace: str, where: str) -> Item:
    message = (field(entry, "MESSAGE") or "").strip()
    if not message:
        return Skip("empty MESSAGE", where)
    realtime = field(entry, "__REALTIME_TIMESTAMP")
    if not realtime or not realtime.isdigit():
        return Skip("no __REALTIME_TIMESTAMP", where)
    try:
        prio = int(field(entry, "PRIORITY") or 6)
    except ValueError:
        prio = 6
    unit = (field(entry, "_SYSTEMD_UNIT") or field(entry, "UNIT") or field(entry, "USER_UNIT")
            or field(entry, "_SYSTEMD_USER_UNIT"))
    ident = field(entry, "SYSLOG_IDENTIFIER") or field(entry, "_COMM") or unit or "journal"
    rec = LogRecord(timestamp=datetime.fromtimestamp(int(realtime) / 1e6, UTC), content=message,
                    level=LEVELS.get(prio, ""), component=ident, pid=field(entry, "_PID") or "")
    cursor = field(entry, "__CURSOR")
    event_id = stable_id("journal", cursor) if cursor else stable_id(
        "journal", field(entry, "_BOOT_ID"), realtime, ident, message)
    meta: dict[str, Any] = {"priority": prio, "identifier": ident, "tags": ["journal"]}
    for key, name in (("host", "_HOSTNAME"), ("boot", "_BOOT_ID"), ("unit", "_SYSTEMD_UNIT"),
                      ("transport", "_TRANSPORT")):
        if (v := field(entry, name)) is not None:
            meta[key] = v
    fields = log_event_fields(rec, id=event_id, namespace=namespace, source="journal",
                              metadata=meta, service=unit or ident)
    return make_event(where, **fields)


def read_lines(lines: Iterable[str], label: str, namespace: str) -> Iterator[Item]:
    for rec in json_lines(lines, label):
        yield rec if isinstance(rec, Skip) else entry_event(rec[1], namespace, rec[0])


def journalctl_command(since: datetime | None) -> list[str]:
    cmd = ["journalctl", "-o", "json", "--no-pager"]
    if since is not None:
        cmd += ["--since", since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")]
    return cmd


def read_journalctl(since: datetime | None, namespace: str) -> Iterator[Item]:
    if shutil.which("journalctl") is None:
        raise JournalUnavailable("journalctl is not on PATH: give files of `journalctl -o json` "
                                 "output instead")
    cmd = journalctl_command(since)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          encoding="utf-8", errors="replace") as proc:
        assert proc.stdout is not None
        yield from read_lines(proc.stdout, "journalctl", namespace)
        err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode not in (0, None):
        raise JournalUnavailable(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()[:300]}")


class JournalImporter:
    name = "journal"
    help = "the systemd journal (journalctl -o json --since DATE), or files of that output"

    def read(self, paths: list[Path], opts: Options) -> Iterator[Item]:
        namespace = opts.namespace or "default"
        if not paths:
            if opts.since is None:
                raise JournalUnavailable("reading the live journal needs --since "
                                         "(e.g. --since 2026-01-01)")
            yield from read_journalctl(opts.since, namespace)
            return
        for path in paths:
            with open(path, encoding="utf-8", errors="replace") as fh:
                yield from read_lines(fh, str(path), namespace)
