"""One subject's events that came together (`core/incidents.py`): the cause first for a question
why, else the outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from totalrecall_recall_api.core.fusion import Candidate
from totalrecall_recall_api.core.incidents import asks_cause, incident_first

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
GAP_S = 600.0


@dataclass
class Row:
    category: str
    subcategory: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


def _cand(key: str, score: float, seconds: float = 0) -> Candidate:
    return Candidate(key, T0 + timedelta(seconds=seconds), key, score=score)


UNIT = {"service": "backup-x7.service"}
UNIT_ROWS = {"fail": Row("system.service", "fail", UNIT),  # "Failed with result 'exit-code'"
             "cause": Row("error", "application", UNIT),  # "Failed at step EXEC …: Permission denied"
             "chat": Row("conversation", "turn")}


@pytest.mark.parametrize(("query", "cause"), [
    ("why did backup-x7.service fail?", True), ("what error did backup-x7 hit?", True),
    ("what killed the cache container?", True), ("what was the reason it stopped?", True),
    ("backup-x7.service failed", False), ("did backup-x7 crash?", False),
    ("what happened to my cache container", False),
])
def test_a_question_that_asks_for_a_cause(query: str, cause: bool) -> None:
    assert asks_cause(query) is cause


def test_why_a_unit_failed_is_its_first_failure_the_cause_line() -> None:
    ranked = [_cand("fail", 1.0, seconds=0.02), _cand("chat", 0.9), _cand("cause", 0.8)]
    out = incident_first(ranked, "why did backup-x7.service fail?", UNIT_ROWS.get, GAP_S)
    assert [c.key for c in out] == ["cause", "chat", "fail"]
    assert out[0].score == 1.0 and out[0].components["incident"] == pytest.approx(0.2)


def test_that_a_unit_failed_is_its_outcome_the_last_line() -> None:
    ranked = [_cand("cause", 1.0), _cand("fail", 0.8, seconds=0.02)]
    out = incident_first(ranked, "did backup-x7 crash?", UNIT_ROWS.get, GAP_S)
    assert [c.key for c in out] == ["fail", "cause"]


def test_what_happened_to_a_container_is_how_it_ended_not_that_it_started() -> None:
    cache = {"container_name": "cache-7f"}
    rows = {"start": Row("system.container", "start", cache),
            "oom": Row("system.container", "oom", cache)}
    ranked = [_cand("start", 1.0), _cand("oom", 0.9, seconds=1)]
    out = incident_first(ranked, "what happened to my cache container", rows.get, GAP_S)
    assert [c.key for c in out] == ["oom", "start"]
    # asked why it stopped: its failure, though it came last (starting is no cause)
    ranked = [_cand("start", 1.0), _cand("oom", 0.9, seconds=1)]
    out = incident_first(ranked, "why did the cache container stop?", rows.get, GAP_S)
    assert [c.key for c in out] == ["oom", "start"]


def test_events_far_apart_are_two_incidents_and_other_subjects_never_mix() -> None:
    rows = {"old": Row("system.container", "die", {"container_name": "web"}),
            "new": Row("system.container", "start", {"container_name": "web"}),
            "api": Row("system.container", "die", {"container_name": "api"})}
    ranked = [_cand("old", 1.0), _cand("api", 0.9, seconds=5), _cand("new", 0.8, seconds=GAP_S + 1)]
    out = incident_first(ranked, "what happened to web?", rows.get, GAP_S)
    assert [c.key for c in out] == ["old", "api", "new"]
    assert all("incident" not in c.components for c in out)


def test_one_unit_on_two_hosts_is_two_subjects() -> None:
    rows = {"db": Row("system.service", "fail", {**UNIT, "host": "db-01"}),
            "web": Row("error", "application", {**UNIT, "host": "web-02"})}
    ranked = [_cand("db", 1.0, seconds=1), _cand("web", 0.9)]
    out = incident_first(ranked, "why did backup-x7.service fail on db-01?", rows.get, GAP_S)
    assert [c.key for c in out] == ["db", "web"]


def test_a_files_last_write_answers_who_changed_it_but_not_whether_it_was_created() -> None:
    path = {"path": "/etc/haproxy-prod.conf", "changed_by": {"pid": 7}}
    rows = {"created": Row("file", "create", path), "modified": Row("file", "modify", path)}
    ranked = [_cand("created", 1.0), _cand("modified", 0.9, seconds=0.3)]
    out = incident_first(ranked, "who changed haproxy-prod.conf?", rows.get, GAP_S)
    assert [c.key for c in out] == ["modified", "created"]
    ranked = [_cand("created", 1.0), _cand("modified", 0.9, seconds=0.3)]
    out = incident_first(ranked, "was haproxy-prod.conf created recently?", rows.get, GAP_S)
    assert [c.key for c in out] == ["created", "modified"]


def test_an_accounts_events_are_no_incident() -> None:
    """A new user and the group it was put in are two facts: each is asked for by its words."""
    eve = {"user": "eve"}
    rows = {"added": Row("security", "user_added", eve),
            "group": Row("security", "group_membership", eve)}
    ranked = [_cand("added", 1.0), _cand("group", 0.9, seconds=0.1)]
    out = incident_first(ranked, "what is eve's home directory?", rows.get, GAP_S)
    assert [c.key for c in out] == ["added", "group"]
