"""Plain log files, one memory per line; and the line → event mapping LogQA measures.

`LogRecord` + `log_event_fields` are the one mapping of a log line to a memory, shared by this
importer, the journal importer and `eval/logqa.py` (so `make eval`'s LogQA measures what an
import stores): the text `"<Level> <Component>[<Pid>]: <Content>"`, category `system.service`,
the line's own timestamp, the component as `metadata.service`, the level as the severity.

Line formats recognised (anything else is kept whole, with the time of the line before it):

* LogHub HDFS      `081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 …`
* LogHub Spark     `17/06/09 20:10:40 INFO executor.Executor: Finished task 0.0 …`
* syslog           `Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster …` (no year in the
                   line: the file's modification year, or the year before for a later date)
* ISO 8601 first   `2024-03-01T10:00:00.123Z ERROR app.db: connection refused` (also with a space,
                   a `,123` fraction, an offset; Python logging's `- name - LEVEL - msg` and a
                   syslog `host ident[pid]:` after it are recognised)

Ids: `log-` + hash of the file's name, the line number and the line, so the same file imported
again (or from another directory) adds nothing, and a rotated file's new lines are new memories.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .base import Item, Options, Skip, expand, file_time, make_event, split_summary_detail, stable_id

#: Log levels → the API's severities (anything else is "info").
SEVERITY = {"WARN": "warning", "WARNING": "warning", "ERROR": "error", "ERR": "error",
            "SEVERE": "error", "FATAL": "critical", "CRIT": "critical", "CRITICAL": "critical",
            "ALERT": "critical", "EMERG": "critical"}
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
_LEVEL = r"(?P<level>TRACE|DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|ERR|SEVERE|CRIT(?:ICAL)?|FATAL)"
_HDFS = re.compile(r"^(?P<d>\d{6}) (?P<t>\d{6}) (?P<pid>\d+) " + _LEVEL +
                   r" (?P<comp>[^\s:]+): (?P<msg>.*)$")
_SPARK = re.compile(r"^(?P<d>\d{2}/\d{2}/\d{2}) (?P<t>\d{2}:\d{2}:\d{2}) " + _LEVEL +
                    r" (?P<comp>[^\s:]+): (?P<msg>.*)$")
_SYSLOG_TS = re.compile(r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<t>\d{2}:\d{2}:\d{2}) ")
_ISO_TS = re.compile(r"^\[?(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
                     r"(?:Z|[+-]\d{2}:?\d{2})?)\]? ")
#: After a syslog time: `host ident[pid]: message`.
_HOST_IDENT = re.compile(r"^(?P<host>\S+) (?P<comp>[^\s:\[\]]+)(?:\[(?P<pid>\d+)\])?: (?P<msg>.*)$")
#: After an ISO time: `[LEVEL] [component:] message`, or Python logging's `- name - LEVEL - msg`.
_LEVEL_COMP = re.compile(r"^\[?" + _LEVEL + r"\]?\s+(?:(?P<comp>[\w.$/-]+):\s+)?(?P<msg>.*)$")
_PYLOG = re.compile(r"^-\s+(?P<comp>[\w.$/-]+)\s+-\s+" + _LEVEL + r"\s+-\s+(?P<msg>.*)$")


@dataclass(frozen=True)
class LogRecord:
    """One log line, parsed."""

    timestamp: datetime
    content: str
    level: str = ""
    component: str = ""
    pid: str = ""

    @property
    def text(self) -> str:
        """`"<Level> <Component>[<Pid>]: <Content>"`, missing parts left out with their
        punctuation (`"LabSZ[24200]: …"`, `"INFO spark.SecurityManager: …"`)."""
        head = " ".join(p for p in (self.level, self.component) if p)
        if self.pid:
            head += f"[{self.pid}]"
        return f"{head}: {self.content}" if head else self.content

    @property
    def severity(self) -> str:
        return SEVERITY.get(self.level.upper(), "info")


def log_event_fields(record: LogRecord, *, id: str, namespace: str, source: str,
                     metadata: Mapping[str, Any] | None = None, service: str | None = None
                     ) -> dict[str, Any]:
    """The ingest fields of one log line (a `MemoryEvent`'s keyword arguments, or the JSON of
    `POST /memory/ingest`). `service` defaults to the component."""
    meta: dict[str, Any] = {"service": service if service is not None else record.component,
                            **dict(metadata or {}), "severity": record.severity}
    if record.level:
        meta["level"] = record.level
    if record.pid:
        meta["pid"] = record.pid
    summary, detail = split_summary_detail(record.text)  # a few HDFS lines list 100s of blocks
    event: dict[str, Any] = {"id": id, "namespace": namespace, "summary": summary,
                             "category": "system.service", "source": source, "actor": "system",
                             "timestamp": record.timestamp.isoformat(), "metadata": meta}
    if detail:
        event["detail"] = detail
    return event


@dataclass
class LineParser:
    """Parses the lines of one file in order; a line without a time gets the previous one's
    (a stack trace's lines follow their message), the first ones the file's time."""

    default_time: datetime
    last_time: datetime | None = None
    hosts: set[str] = field(default_factory=set)

    def parse(self, line: str) -> tuple[LogRecord, dict[str, str]]:
        """The record and extra metadata (`host`) of one line."""
        extra: dict[str, str] = {}
        rec = self._known(line, extra)
        if rec is None:
            rec = LogRecord(timestamp=self.last_time or self.default_time, content=line.strip())
        else:
            self.last_time = rec.timestamp
        return rec, extra

    def _known(self, line: str, extra: dict[str, str]) -> LogRecord | None:
        if m := _HDFS.match(line):
            d, t = m["d"], m["t"]
            ts = datetime(2000 + int(d[:2]), int(d[2:4]), int(d[4:]), int(t[:2]), int(t[2:4]),
                          int(t[4:]), tzinfo=UTC)
            return LogRecord(ts, m["msg"].strip(), m["level"], m["comp"], m["pid"])
        if m := _SPARK.match(line):
            yy, mm, dd = (int(x) for x in m["d"].split("/"))
            h, mi, s = (int(x) for x in m["t"].split(":"))
            return LogRecord(datetime(2000 + yy, mm, dd, h, mi, s, tzinfo=UTC), m["msg"].strip(),
                             m["level"], m["comp"])
        if (m := _SYSLOG_TS.match(line)) and m["mon"].lower() in _MONTHS:
            h, mi, s = (int(x) for x in m["t"].split(":"))
            year = self.default_time.year
            ts = datetime(year, _MONTHS[m["mon"].lower()], int(m["day"]), h, mi, s, tzinfo=UTC)
            if ts > self.default_time + timedelta(days=1):  # December's lines in a January file
                ts = ts.replace(year=year - 1)
            return self._after_time(ts, line[m.end():], extra)
        if m := _ISO_TS.match(line):
            try:
                ts = datetime.fromisoformat(m["ts"].replace(",", ".").replace(" ", "T"))
            except ValueError:
                return None
            ts = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
            return self._after_time(ts.astimezone(UTC), line[m.end():], extra)
        return None

    def _after_time(self, ts: datetime, rest: str, extra: dict[str, str]) -> LogRecord:
        rest = rest.strip()
        if (m := _LEVEL_COMP.match(rest) or _PYLOG.match(rest)) is not None:
            return LogRecord(ts, m["msg"].strip(), m["level"], m["comp"] or "")
        if (m := _HOST_IDENT.match(rest)) is not None:
            extra["host"] = m["host"]
            return LogRecord(ts, m["msg"].strip(), "", m["comp"], m["pid"] or "")
        return LogRecord(ts, rest)


def read_log_file(path: Path, namespace: str, source: str = "logs") -> Iterator[Item]:
    """Every line of one file as an event (blank lines skipped)."""
    parser = LineParser(default_time=file_time(path))
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            where = f"{path}:{n}"
            if not line.strip():
                yield Skip("blank line", where)
                continue
            rec, extra = parser.parse(line)
            if not rec.content:
                yield Skip("no message", where)
                continue
            fields = log_event_fields(rec, id=stable_id("log", path.name, n, line),
                                      namespace=namespace, source=source,
                                      metadata={"file": path.name, "line": n, **extra})
            yield make_event(where, **fields)


class LogsImporter:
    name = "logs"
    help = "plain log files (or directories of *.log), one memory per line"

    def read(self, paths: list[Path], opts: Options) -> Iterator[Item]:
        for path in expand(paths, ("*.log", "*.log.[0-9]", "*.txt")):
            yield from read_log_file(path, opts.namespace or "default")
