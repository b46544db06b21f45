"""LogQA: real LogHub system logs with questions (the data's `logqa/` folder, see its README).

Each system (HDFS, OpenSSH, Spark) is loaded as `totalrecall import logs` loads a log (the same
mapping, `cli/totalrecall/importers/logs.py`): one memory per line in one namespace per system,
category `system.service`, source `journal`, the line's own timestamp, the component in metadata,
the text `"<Level> <Component>[<Pid>]: <Content>"`. The gold of a question
is every line whose Content equals its RawLog (else every line containing it); Hit@k is the first
gold line within the first k memories recalled.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from totalrecall.importers.logs import LogRecord, log_event_fields

from .datasets import default_data_dir

SYSTEMS = ("HDFS", "OpenSSH", "Spark")
SPLITS = ("train", "val")
#: Year of the OpenSSH sample, whose lines carry none (`Dec 10 06:55:46`).
OPENSSH_YEAR = 2024
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}


def parse_log_time(system: str, row: Mapping[str, str]) -> datetime:
    """The line's own timestamp (UTC): HDFS `081109 203615`, Spark `17/06/09 20:10:40`, OpenSSH
    `Dec 10 06:55:46` (year `OPENSSH_YEAR`)."""
    if system == "HDFS":
        d, t = row["Date"].strip().zfill(6), row["Time"].strip().zfill(6)
        return datetime(2000 + int(d[:2]), int(d[2:4]), int(d[4:]), int(t[:2]), int(t[2:4]),
                        int(t[4:]), tzinfo=UTC)
    if system == "Spark":
        yy, mm, dd = (int(x) for x in row["Date"].strip().split("/"))
        h, mi, s = (int(x) for x in row["Time"].strip().split(":"))
        return datetime(2000 + yy, mm, dd, h, mi, s, tzinfo=UTC)
    if system == "OpenSSH":
        h, mi, s = (int(x) for x in row["Time"].strip().split(":"))
        return datetime(OPENSSH_YEAR, _MONTHS[row["Date"].strip().lower()[:3]],
                        int(row["Day"]), h, mi, s, tzinfo=UTC)
    raise ValueError(f"unknown LogQA system {system!r}")


@dataclass(frozen=True)
class LogLine:
    system: str
    line_id: int
    timestamp: datetime
    component: str
    content: str
    level: str = ""
    pid: str = ""
    template: str = ""  # LogHub's EventId: the lines of one template differ only in their values

    @property
    def id(self) -> str:
        """Stable event id (ingest is idempotent by it): `hdfs:17`."""
        return f"{self.system.lower()}:{self.line_id}"

    @property
    def session(self) -> str:
        """The thread a line belongs to (what `client.make_id_resolver` keys by)."""
        return self.system

    @property
    def index(self) -> int:
        return self.line_id

    @property
    def record(self) -> LogRecord:
        return LogRecord(timestamp=self.timestamp, content=self.content, level=self.level,
                         component=self.component, pid=self.pid)

    @property
    def text(self) -> str:
        """`"<Level> <Component>[<Pid>]: <Content>"` (the log importer's text of a line)."""
        return self.record.text

    def to_ingest(self, namespace: str) -> dict[str, Any]:
        """The event `totalrecall import logs` makes of a line (`importers/logs.py`), with the
        LogQA system and line number in metadata."""
        return log_event_fields(self.record, id=self.id, namespace=namespace, source="journal",
                                metadata={"system": self.system, "line": self.line_id})


@dataclass(frozen=True)
class LogQuestion:
    qid: str                 # `HDFS/val#3`: stable, also what the split-half folds hash
    system: str
    split: str
    question: str
    answer: str
    raw_log: str
    gold: frozenset[str]     # line ids

    @property
    def category(self) -> str:
        return f"{self.system} {self.split}"


@dataclass
class LogSystem:
    name: str
    lines: list[LogLine]
    questions: list[LogQuestion]


def load_lines(path: Path, system: str) -> list[LogLine]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [LogLine(system=system, line_id=int(r["LineId"]), timestamp=parse_log_time(system, r),
                        component=(r.get("Component") or "").strip(),
                        content=r["Content"].strip(), level=(r.get("Level") or "").strip(),
                        pid=(r.get("Pid") or "").strip(),
                        template=(r.get("EventId") or "").strip())
                for r in csv.DictReader(fh)]


def gold_lines(lines: list[LogLine], raw_log: str) -> frozenset[str]:
    """Lines whose Content equals RawLog; if none, lines containing it."""
    raw = raw_log.strip()
    exact = frozenset(ln.id for ln in lines if ln.content == raw)
    return exact or frozenset(ln.id for ln in lines if raw and raw in ln.content)


def load_questions(path: Path, system: str, split: str,
                   lines: list[LogLine]) -> list[LogQuestion]:
    out: list[LogQuestion] = []
    for i, row in enumerate(r for r in path.read_text(encoding="utf-8").splitlines() if r.strip()):
        qa = json.loads(row)
        out.append(LogQuestion(qid=f"{system}/{split}#{i}", system=system, split=split,
                               question=str(qa["Question"]), answer=str(qa.get("Answer", "")),
                               raw_log=str(qa["RawLog"]),
                               gold=gold_lines(lines, str(qa["RawLog"]))))
    return out


def load_logqa(data_dir: Path | None = None, systems: tuple[str, ...] = SYSTEMS
               ) -> list[LogSystem]:
    """Every system with its lines and its train/val questions (a split without a file is
    skipped: Spark has train only). Questions whose RawLog matches no line are dropped."""
    base = (data_dir or default_data_dir()) / "logqa"
    out: list[LogSystem] = []
    for system in systems:
        lines = load_lines(base / f"{system}_2k.log_structured.csv", system)
        questions: list[LogQuestion] = []
        for split in SPLITS:
            path = base / f"{system}_qa_{split}.jsonl"
            if path.exists():
                questions += [q for q in load_questions(path, system, split, lines) if q.gold]
        out.append(LogSystem(name=system, lines=lines, questions=questions))
    return out
