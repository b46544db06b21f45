"""core/supersede.py: an ended process's state events no longer answer a question about now."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from totalrecall_recall_api.core.fusion import Candidate
from totalrecall_recall_api.core.supersede import (
    asks_about_now,
    ends,
    supersede_ended,
)

T0 = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)


@dataclass
class Row:
    subcategory: str
    pid: int
    process: str = "python3"
    minutes: int = 0
    category: str = "system.process"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.metadata = {"pid": self.pid, "process": self.process}
        self.timestamp = T0 + timedelta(minutes=self.minutes)


def _cands(scores: dict[str, float]) -> list[Candidate]:
    return [Candidate(k, T0, k, score=v) for k, v in scores.items()]


def test_questions_about_now() -> None:
    assert asks_about_now("what's using my CPU right now?")
    assert asks_about_now("which process is currently hogging the CPU")
    assert asks_about_now("is ffmpeg still running hot")
    assert not asks_about_now("what happened to process 4242?")
    assert not asks_about_now("why did backup.service fail yesterday?")


def test_an_ended_process_ranks_below_a_running_one() -> None:
    rows = {"old": Row("high_cpu", 100, minutes=0), "new": Row("high_cpu", 200, minutes=5),
            "end": Row("exit", 100, minutes=2)}
    out = supersede_ended(_cands({"old": 0.9, "new": 0.6}), rows, ends(rows.values()), 0.3)
    assert [c.key for c in out] == ["new", "old"]
    assert out[1].score == 0.9 * 0.3
    assert out[1].components["superseded"] < 0


def test_a_reused_pid_or_an_earlier_end_does_not_supersede() -> None:
    rows = {"hog": Row("high_cpu", 100, process="ffmpeg", minutes=5),
            "other": Row("crash", 100, process="bash", minutes=6),   # another process's PID
            "before": Row("exit", 100, process="ffmpeg", minutes=1)}  # an earlier run ended
    out = supersede_ended(_cands({"hog": 0.8}), rows, ends(rows.values()), 0.3)
    assert out[0].score == 0.8 and "superseded" not in out[0].components


def test_only_process_state_events_are_touched() -> None:
    rows = {"end": Row("exit", 100, minutes=2), "oom": Row("oom_kill", 300, minutes=3),
            "mem": Row("high_mem", 300, minutes=1)}
    out = supersede_ended(_cands({"end": 0.7, "mem": 0.5}), rows, ends(rows.values()), 0.5)
    assert {c.key: c.score for c in out} == {"end": 0.7, "mem": 0.25}
