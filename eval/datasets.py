"""Loaders for the benchmark data (`default_data_dir`; each set's README is in its folder),
with the data-quirk fixes.

Both benchmarks become the same shape: a list of `Haystack`s (one memory namespace each), each with
its `Turn`s (one memory per dialogue turn) and its `Question`s (gold = turn ids / session ids).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

#: Limits of the ingest API and the text split that fits them: shared with the importers
#: (`totalrecall import`), whose events these benchmarks load as an import would.
from totalrecall.importers.base import (
    MAX_DETAIL_CHARS as MAX_DETAIL_CHARS,
)
from totalrecall.importers.base import (
    MAX_SUMMARY_CHARS as MAX_SUMMARY_CHARS,
)
from totalrecall.importers.base import (
    split_summary_detail,
)

REPO = Path(__file__).resolve().parent.parent
#: The folders of the benchmark data, each with its own README.
DATASET_DIRS = ("locomo", "logqa", "longmemeval")


def default_data_dir() -> Path:
    """`$TOTALRECALL_EVAL_DATA`, else the first `eval/` folder holding the data sets (`locomo/`,
    `logqa/`, `longmemeval/`) in a directory beside the repository (where a workspace keeps
    its benchmark data), else `<repo>/.eval-data`. Nothing is downloaded."""
    import os

    env = os.environ.get("TOTALRECALL_EVAL_DATA")
    if env:
        return Path(env)
    with contextlib.suppress(OSError):
        for sibling in sorted(REPO.parent.iterdir()):
            cand = sibling / "eval"
            if sibling != REPO and all((cand / d).is_dir() for d in DATASET_DIRS):
                return cand
    return REPO / ".eval-data"


@dataclass(frozen=True)
class Turn:
    id: str                 # stable memory id: "D1:3" (LoCoMo) / "<session_id>:<idx>" (LME)
    session: str            # "D1" / the LongMemEval session id
    index: int              # position inside the session (0-based)
    speaker: str            # LoCoMo speaker name / "user" | "assistant"
    text: str
    timestamp: datetime     # the session's date (+ `index` seconds, so turns keep their order)
    caption: str | None = None

    @property
    def full_text(self) -> str:
        """`"<speaker>: <text>"` plus the image caption when there is one."""
        text = f"{self.speaker}: {self.text}"
        if self.caption:
            text += f" [image: {self.caption}]"
        return text

    def summary_detail(self) -> tuple[str, str]:
        return split_summary_detail(self.full_text)

    def to_ingest(self, namespace: str) -> dict[str, Any]:
        summary, detail = self.summary_detail()
        event: dict[str, Any] = {
            "id": self.id, "namespace": namespace, "summary": summary,
            "category": "conversation", "subcategory": "turn",
            "actor": self.speaker[:128] or "user",
            "source": "eval", "timestamp": self.timestamp.isoformat(),
            "metadata": {"session": self.session, "turn": self.index},
        }
        if detail:
            event["detail"] = detail
        return event


@dataclass(frozen=True)
class Question:
    qid: str
    question: str
    category: str                       # LoCoMo "1".."5" / LongMemEval question_type
    gold: frozenset[str]                # gold turn ids (may be empty for LongMemEval)
    gold_sessions: frozenset[str] = frozenset()
    answer: str = ""
    asked_at: datetime | None = None    # LongMemEval's question_date: recall's `asOf`


@dataclass
class Haystack:
    key: str                            # conv-26 / the LongMemEval question_id
    turns: list[Turn]
    questions: list[Question]
    session_of: dict[str, str] = field(default_factory=dict)   # turn id -> session

    def __post_init__(self) -> None:
        if not self.session_of:
            self.session_of = {t.id: t.session for t in self.turns}

    def unique_turns(self) -> list[Turn]:
        """Turns with distinct ids (LongMemEval repeats a few sessions verbatim)."""
        seen: dict[str, Turn] = {}
        for t in self.turns:
            seen.setdefault(t.id, t)
        return list(seen.values())


# ------------------------------------------------------------------------------------------------
# LoCoMo

_LOCOMO_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$",
    re.IGNORECASE)
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}


def parse_locomo_date(text: str) -> datetime:
    """`"1:56 pm on 8 May, 2023"` → 2023-05-08T13:56Z."""
    m = _LOCOMO_DATE.match(text)
    if not m:
        raise ValueError(f"unrecognised LoCoMo date: {text!r}")
    hour, minute, ampm, day, month, year = m.groups()
    mon = _MONTHS.get(month.lower()) or next(
        (v for k, v in _MONTHS.items() if k.startswith(month.lower()[:3])), 0)
    if not mon:
        raise ValueError(f"unrecognised month in LoCoMo date: {text!r}")
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    return datetime(int(year), mon, int(day), h, int(minute), tzinfo=UTC)


_DIA = re.compile(r"D:?(\d+):0*(\d+)")


def normalise_evidence(entries: list[str] | str | None) -> list[str]:
    """Evidence → canonical dia_ids: splits `"D8:6; D9:17"` and space/comma-joined lists, fixes
    `"D:11:26"` → `D11:26` and `"D30:05"` → `D30:5`; drops entries that are not dia_ids (`"D"`).
    Order kept, duplicates removed."""
    if entries is None:
        return []
    if isinstance(entries, str):
        entries = [entries]
    out: list[str] = []
    for entry in entries:
        for m in _DIA.finditer(str(entry)):
            dia = f"D{int(m.group(1))}:{int(m.group(2))}"
            if dia not in out:
                out.append(dia)
    return out


def _canonical_dia(dia_id: str) -> str:
    ids = normalise_evidence([dia_id])
    return ids[0] if ids else dia_id


def load_locomo(path: Path | None = None, *, categories: set[str] | None = None) -> list[Haystack]:
    """One haystack per conversation. Questions without (valid) evidence are skipped; evidence
    pointing at turns that do not exist is dropped."""
    path = path or default_data_dir() / "locomo" / "locomo_dev.json"
    samples = json.loads(Path(path).read_text())
    out: list[Haystack] = []
    for sample in samples:
        conv = sample["conversation"]
        turns: list[Turn] = []
        sessions = sorted(int(k.split("_")[1]) for k in conv
                          if re.fullmatch(r"session_\d+", k) and isinstance(conv[k], list))
        for n in sessions:
            date = parse_locomo_date(conv[f"session_{n}_date_time"])
            for i, t in enumerate(conv[f"session_{n}"]):
                text = str(t.get("text", "")).strip()
                caption = (t.get("blip_caption") or "").strip() or None
                if not text and not caption:
                    continue
                turns.append(Turn(id=_canonical_dia(t["dia_id"]), session=f"D{n}", index=i,
                                  speaker=str(t.get("speaker") or "unknown"), text=text,
                                  timestamp=date + timedelta(seconds=i), caption=caption))
        ids = {t.id for t in turns}
        questions: list[Question] = []
        for qi, qa in enumerate(sample.get("qa", [])):
            cat = str(qa.get("category"))
            if categories is not None and cat not in categories:
                continue
            gold = [e for e in normalise_evidence(qa.get("evidence")) if e in ids]
            if not gold:
                continue
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            questions.append(Question(qid=f"{sample['sample_id']}#{qi}", question=qa["question"],
                                      category=cat, gold=frozenset(gold), answer=str(answer)))
        out.append(Haystack(key=str(sample["sample_id"]), turns=turns, questions=questions))
    return out


# ------------------------------------------------------------------------------------------------
# LongMemEval

_LME_DATE = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$")


def parse_lme_date(text: str) -> datetime:
    """`"2023/05/20 (Sat) 01:44"` → 2023-05-20T01:44Z."""
    m = _LME_DATE.match(text)
    if not m:
        raise ValueError(f"unrecognised LongMemEval date: {text!r}")
    y, mo, d, h, mi = m.groups()
    return datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), tzinfo=UTC)


def load_longmemeval(path: Path | None = None) -> list[Haystack]:
    """One haystack per question (its own namespace). `_abs` (abstention) questions are skipped."""
    path = path or default_data_dir() / "longmemeval" / "longmemeval_s_dev.jsonl.gz"
    opener = gzip.open if str(path).endswith(".gz") else open
    out: list[Haystack] = []
    with opener(path, "rt") as fh:  # type: ignore[operator]
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            qid = str(row["question_id"])
            if qid.endswith("_abs"):
                continue
            turns: list[Turn] = []
            gold: set[str] = set()
            for sid, date_s, session in zip(row["haystack_session_ids"], row["haystack_dates"],
                                            row["haystack_sessions"], strict=True):
                date = parse_lme_date(date_s)
                for i, t in enumerate(session):
                    text = str(t.get("content", "")).strip()
                    if not text:
                        continue
                    tid = f"{sid}:{i}"
                    turns.append(Turn(id=tid, session=str(sid), index=i,
                                      speaker=str(t.get("role") or "user"), text=text,
                                      timestamp=date + timedelta(seconds=i)))
                    if t.get("has_answer"):
                        gold.add(tid)
            q = Question(qid=qid, question=row["question"], category=str(row["question_type"]),
                         gold=frozenset(gold),
                         gold_sessions=frozenset(str(s) for s in row["answer_session_ids"]),
                         answer=str(row.get("answer", "")),
                         asked_at=parse_lme_date(row["question_date"]))
            out.append(Haystack(key=qid, turns=turns, questions=[q]))
    return out


def load(dataset: str, limit: int | None = None, data_dir: Path | None = None) -> list[Haystack]:
    """`limit` caps the number of haystacks (LoCoMo conversations / LongMemEval questions)."""
    base = data_dir or default_data_dir()
    if dataset == "locomo":
        hs = load_locomo(base / "locomo" / "locomo_dev.json")
    elif dataset == "longmemeval":
        hs = load_longmemeval(base / "longmemeval" / "longmemeval_s_dev.jsonl.gz")
    else:
        raise ValueError(f"unknown dataset {dataset!r}")
    return hs[:limit] if limit else hs


_NS_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


def namespace_for(tag: str, key: str) -> str:
    """A valid namespace (`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) for one haystack of one run."""
    ns = _NS_BAD.sub("-", f"{tag}.{key}").strip("-._")
    if len(ns) > 64:
        import hashlib

        digest = hashlib.sha1(ns.encode()).hexdigest()[:10]
        ns = ns[:53].rstrip("-._") + "." + digest
    if not ns or not ns[0].isalnum():
        ns = "e" + ns[:63]
    return ns
