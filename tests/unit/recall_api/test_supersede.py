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


# --- facts replaced by newer ones --------------------------------------------------------------
def test_a_preference_states_its_subject() -> None:
    from totalrecall_recall_api.core.supersede import subject_of

    def s(summary: str, category: str = "user_pattern", sub: str = "preference",
          **md: Any) -> str | None:
        return subject_of(summary, category, sub, md)

    assert s("User prefers vim") == s("the user now prefers neovim") == "prefers:editor"
    assert s("User switched to VS Code") == "prefers:editor"
    assert s("User prefers podman over docker", "conversation", "note") \
        == "prefers:container runtime"
    assert s("User prefers tabs for indentation.") == "prefers:indentation"
    assert s("User prefers neovim as their text editor") == "prefers:editor"
    # A preference for one use does not replace another's.
    assert s("User prefers vim for quick edits") == "prefers:quick edits"
    assert s("User prefers VS Code for big projects") == "prefers:big projects"
    assert s("Anything", "conversation", "note", subject="Staging DB port") == "staging db port"
    # Not a preference, or not a fact that a later one replaces: no subject.
    assert s("User opened vim on main.py") is None
    assert s("I prefer neovim", "conversation", "flush") is None
    assert s("nginx failed", "system.service", "fail") is None


def test_superseded_facts_rank_far_below_unless_history_is_asked() -> None:
    from totalrecall_recall_api.core.supersede import asks_about_history, demote_superseded

    rows = {"old": Row("preference", 1), "new": Row("preference", 2)}
    rows["old"].metadata["superseded_by"] = "ns\x1fnew"
    ranked = demote_superseded(_cands({"old": 1.0, "new": 0.6}), rows, 0.1)
    assert [c.key for c in ranked] == ["new", "old"]
    assert abs(ranked[1].score - 0.1) < 1e-9 and abs(ranked[1].components["superseded"] + 0.9) < 1e-9
    assert asks_about_history("which editor did I use before?")
    assert asks_about_history("what editor did the user previously prefer")
    assert not asks_about_history("which editor does the user prefer?")
    assert [c.key for c in demote_superseded(_cands({"old": 1.0}), rows, 1.0)] == ["old"]
    # 0: not recalled at all
    assert [c.key for c in demote_superseded(_cands({"old": 1.0, "new": 0.6}), rows, 0.0)] \
        == ["new"]


def test_tools_by_name_and_in_text() -> None:
    from totalrecall_recall_api.core.tools import tool_of, tools_in_text

    assert tool_of("/usr/bin/nvim") == ("editor", "neovim")
    assert tool_of("code") == ("editor", "VS Code")
    assert tool_of("python3") is None
    assert tools_in_text("switched from vim to neovim, kept zsh") == [
        ("editor", "vim"), ("editor", "neovim"), ("shell", "zsh")]
    assert tools_in_text("write the code") == []  # "code" in prose is a word
    assert tools_in_text("code .", prose=False) == [("editor", "VS Code")]
