"""Intent routing (`core/intent.py`): the words people use route a question to the kind of
memory that answers it, and a question about now gets the newest state of what it names."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from totalrecall_recall_api.core.fusion import Candidate
from totalrecall_recall_api.core.intent import (
    asks_for_state,
    intents,
    named_things,
    named_things_first,
    newest_state_first,
    routed_first,
    state_subject,
)

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


@dataclass
class Row:
    category: str
    subcategory: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: datetime = T0


def _names(query: str) -> set[str]:
    return {i.name for i in intents(query)}


@pytest.mark.parametrize(("query", "expected"), [
    ("why's my box crawling", {"slow"}),
    ("what ate my RAM", {"memory"}),
    ("what should I close to speed things up?", {"slow"}),
    ("is anything hogging resources?", {"slow"}),
    ("what is running hot on the CPU?", {"cpu"}),
    ("who touched /etc/hosts?", {"writer"}),
    ("which process modified nginx.conf?", {"writer"}),
    ("how did app.conf get modified?", {"writer"}),
    ("did the backup container die?", {"containers", "failure"}),
    ("was the cache container OOM-killed? out of memory?", {"containers", "memory", "failure"}),
    ("why did backup-x.service fail?", {"failure"}),
    ("how much room can I get back?", {"cleanup"}),
    ("what changed before nginx.service broke?", {"changed", "writer"}),  # the when-clause: none
    ("was app.conf created recently?", {"changed"}),
    ("which old files or caches can be removed?", {"cleanup"}),
    ("can I prune podman images?", {"cleanup", "containers"}),
    ("what can I clean up to free disk space?", {"cleanup"}),
    ("how big are the logs?", {"cleanup"}),
    ("is there junk I can delete?", {"cleanup"}),
    ("did bob enter the wrong sudo password?", {"security"}),
    ("who was added to the docker group?", {"security"}),
    ("did eve get docker access, is she a member?", {"security", "containers"}),
])
def test_the_words_people_use_name_the_intent(query: str, expected: set[str]) -> None:
    assert _names(query) == expected


@pytest.mark.parametrize("query", [
    "What did Caroline paint last summer?",
    "what is filling the disk: dump-a.bin?",
    "which big file was written to the watched directory?",
    "Which block was served to 10.251.42.84?",
    "When did Caroline and her boyfriend broke up?",
    "what change fixed the flaky wifi?",
])
def test_questions_about_other_things_state_none(query: str) -> None:
    assert _names(query) == set()


def _cand(key: str, score: float, minutes: int = 0) -> Candidate:
    return Candidate(key, T0 + timedelta(minutes=minutes), key, score=score)


def test_the_memories_answering_the_intent_come_first_in_their_fused_order() -> None:
    rows = {"chat": Row("conversation", "turn"), "cache": Row("file", "create"),
            "pressure": Row("system.pressure", "memory", {"pressure": "memory_percent"}),
            "hog": Row("system.process", "high_mem")}
    ranked = [_cand("chat", 1.0), _cand("cache", 0.9), _cand("hog", 0.5),
              _cand("pressure", 0.4)]
    out = routed_first(ranked, "what ate my RAM?", rows.get)
    assert [c.key for c in out] == ["hog", "pressure", "chat", "cache"]
    assert out[0].components["intent"] == pytest.approx(1.0)


def test_a_memory_answering_more_of_the_intents_ranks_higher() -> None:
    rows = {"health": Row("system.container", "health", {"container_name": "web"}),
            "die": Row("system.container", "die", {"container_name": "web"}),
            "fail": Row("system.service", "fail", {"service": "web.service"})}
    ranked = [_cand("health", 1.0), _cand("fail", 0.9), _cand("die", 0.3)]
    out = routed_first(ranked, "did the web container crash?", rows.get)
    assert [c.key for c in out] == ["die", "health", "fail"]


def test_no_intent_or_no_answering_memory_leaves_the_ranking() -> None:
    rows = {"a": Row("conversation"), "b": Row("conversation")}
    ranked = [_cand("a", 1.0), _cand("b", 0.5)]
    assert [c.key for c in routed_first(ranked, "what ate my RAM?", rows.get)] == ["a", "b"]
    assert [c.key for c in routed_first(ranked, "what did Mel paint?", rows.get)] == ["a", "b"]
    assert all("intent" not in c.components for c in ranked)


def test_a_file_event_answers_who_changed_it_only_when_it_names_the_writer() -> None:
    rows = {"made": Row("file", "create", {"path": "/etc/x.conf"}),
            "written": Row("file", "modify", {"path": "/etc/x.conf",
                                              "changed_by": {"pid": 42, "process": "ansible"}})}
    ranked = [_cand("made", 1.0), _cand("written", 0.8)]
    out = routed_first(ranked, "who changed x.conf?", rows.get)
    assert [c.key for c in out] == ["written", "made"]


def test_a_container_disk_report_answers_what_to_clean_only_with_something_reclaimable() -> None:
    rows = {"full": Row("system.container", "disk", {"reclaimable_bytes": 0, "total_bytes": 9}),
            "caches": Row("system.storage", "reclaimable"),
            "images": Row("system.container", "disk", {"reclaimable_bytes": 5 * 10**9}),
            "older": Row("system.container", "disk"),
            "bytes": Row("system.container", "disk", {"reclaimable_bytes": 24})}
    ranked = [_cand("full", 1.0), _cand("bytes", 0.9), _cand("caches", 0.8), _cand("images", 0.6),
              _cand("older", 0.5)]
    out = routed_first(ranked, "what can I prune to avoid a full disk?", rows.get)
    assert [c.key for c in out] == ["caches", "images", "older", "full", "bytes"]


@pytest.mark.parametrize(("query", "now"), [
    ("is nginx up now?", True), ("is the web container healthy?", True),
    ("is api still unhealthy?", True), ("what's the current health of web?", True),
    ("was the web container healthy yesterday?", False), ("why did web die?", False),
])
def test_questions_about_the_present(query: str, now: bool) -> None:
    assert asks_for_state(query) is now


def test_the_newest_state_of_a_subject_leads_it() -> None:
    web = {"container_name": "web"}
    rows = {"unhealthy": Row("system.container", "health", web),
            "healthy": Row("system.container", "health", web),
            "other": Row("system.container", "die", {"container_name": "api"}),
            "chat": Row("conversation", "turn")}
    ranked = [_cand("unhealthy", 1.0, minutes=1), _cand("chat", 0.9),
              _cand("healthy", 0.5, minutes=2), _cand("other", 0.4, minutes=3)]
    out = newest_state_first(ranked, "is the web container healthy now?", rows.get)
    assert [c.key for c in out] == ["healthy", "chat", "unhealthy", "other"]
    assert out[0].score == 1.0 and out[0].components["newest_state"] == pytest.approx(0.5)
    # a question about the past keeps the fused order
    ranked = [_cand("unhealthy", 1.0, minutes=1), _cand("healthy", 0.5, minutes=2)]
    out = newest_state_first(ranked, "why was web unhealthy?", rows.get)
    assert [c.key for c in out] == ["unhealthy", "healthy"]


def test_state_subjects() -> None:
    assert state_subject(Row("system.container", "oom", {"container_name": "c"})) == \
        ("container", "c")
    assert state_subject(Row("system.container", "disk", {"engine": "podman"})) is None
    assert state_subject(Row("system.service", "fail", {"service": "nginx.service"})) == \
        ("unit", "nginx.service")
    # a log line filed as a service's (LogQA, a log importer) is no state
    assert state_subject(Row("system.service", "", {"service": "sshd"})) is None
    assert state_subject(Row("system.pressure", "recovered", {"pressure": "memory_percent"})) \
        == ("pressure", "memory_percent")
    assert state_subject(Row("system.process", "high_cpu", {"pid": 3})) is None


def test_a_question_about_a_conclusion_weighs_it_like_an_intent() -> None:
    """"what caused the slow builds?" asks for a diagnosis and says "slow": the diagnoses and the
    pressure event stand at one level, in their fused order, but of the diagnoses the cause
    takes the best of their scores."""
    rows = {"diag": Row("diagnosis", "root_cause"), "fix": Row("diagnosis", "resolution"),
            "turn": Row("conversation", "turn"), "pressure": Row("system.pressure", "cpu")}
    cands = {k: _cand(k, s) for k, s in (("turn", 1.0), ("fix", 0.8), ("pressure", 0.7),
                                         ("diag", 0.6))}
    for c in cands.values():
        c.category = rows[c.key].category
    out = routed_first(list(cands.values()), "what caused the slow builds?", rows.get)
    assert [c.key for c in out] == ["diag", "pressure", "fix", "turn"]
    assert out[0].components["conclusion_kind"] == pytest.approx(0.2)


@pytest.mark.parametrize(("query", "first"), [
    ("how did we fix the NAS backup?", "fix"), ("what was the root cause of the NAS backup?", "diag"),
    ("what did we conclude about the NAS backup?", "diag")])  # no kind asked: fused order
def test_the_kind_of_conclusion_asked_for_leads_the_diagnoses(query: str, first: str) -> None:
    rows = {"diag": Row("diagnosis", "root_cause"), "fix": Row("diagnosis", "resolution")}
    cands = [_cand("diag", 0.9), _cand("fix", 0.8)]
    for c in cands:
        c.category = "diagnosis"
    assert routed_first(cands, query, rows.get)[0].key == first


@pytest.mark.parametrize(("query", "names"), [
    ("why did backup-x7ab fail yesterday?", {"backup-x7ab"}),
    ("which tool edited haproxy-q.conf?", set()),  # a part of one letter is no name part
    ("which tool edited haproxy-qq.conf?", {"haproxy-qq.conf"}),
    ("is web-frontend up now?", {"web-frontend"}),
    ("what did Caroline paint?", set()), ("version 1.2.3 installed?", set()),
])
def test_the_names_a_question_gives(query: str, names: set[str]) -> None:
    assert set(named_things(query)) == names


def test_the_memories_naming_the_thing_come_first() -> None:
    nas = _cand("nas", 1.0)
    nas.text = "The root cause was an expired SSH key on the NAS backup target."
    fail = _cand("fail", 0.9)
    fail.text = "backup-x7ab.service: Failed with result 'exit-code'."
    cause = _cand("cause", 0.8)
    cause.text = "systemd: Failed at step EXEC spawning /usr/local/bin/backup-x7ab: Permission denied"
    other = _cand("other", 0.7)
    other.text = "podman container 'my-backup-x7ab-old' died"
    out = named_things_first([nas, fail, cause, other], "why did backup-x7ab fail?")
    assert [c.key for c in out] == ["fail", "cause", "nas", "other"]
    # nothing names it: unchanged
    out = named_things_first([nas, other], "why did backup-zz fail?")
    assert [c.key for c in out] == ["nas", "other"]


def test_a_name_in_the_when_clause_is_the_moment_not_the_thing_asked() -> None:
    conf = _cand("conf", 0.5)
    conf.text = "Modified /etc/app.conf by ansible"
    fail = _cand("fail", 0.9)
    fail.text = "app-x1.service: Failed with result 'exit-code'."
    out = named_things_first([fail, conf], "what changed before app-x1.service broke?")
    assert [c.key for c in out] == ["fail", "conf"] and "named_thing" not in fail.components


def _subject_rows() -> dict[str, Row]:
    return {"cache_oom": Row("system.container", "oom", {"container_name": "cache-7f"}),
            "web_die": Row("system.container", "die", {"container_name": "web-7f"}),
            "report": Row("system.storage", "reclaimable"),
            "nas": Row("diagnosis", "root_cause"),
            "backup_die": Row("system.container", "die", {"container_name": "backup-7f"})}


def _texts(ranked: list[Candidate], texts: dict[str, str]) -> list[Candidate]:
    for c in ranked:
        c.text = texts[c.key]
        c.category = _subject_rows()[c.key].category
    return ranked


def test_a_word_naming_a_subject_puts_its_events_first() -> None:
    ranked = _texts([_cand("web_die", 1.0), _cand("cache_oom", 0.9)],
                    {"web_die": "podman container 'web-7f' died with exit code 1",
                     "cache_oom": "podman container 'cache-7f' was killed by the OOM killer"})
    out = routed_first(ranked, "what happened to my cache container", _subject_rows().get)
    assert [c.key for c in out] == ["cache_oom", "web_die"]
    assert out[0].components["named_subject"] == pytest.approx(1.0)


def test_a_named_subject_orders_within_the_kind_asked_for_not_across_it() -> None:
    """"is the apt cache big?" asks for reclaimable space: a container called cache is no
    answer, though its name holds a word of the question."""
    ranked = _texts([_cand("cache_oom", 1.0), _cand("report", 0.6)],
                    {"cache_oom": "podman container 'cache-7f' was killed by the OOM killer",
                     "report": "16 MiB could be reclaimed: apt package cache 5 MiB"})
    out = routed_first(ranked, "is the apt cache big?", _subject_rows().get)
    assert [c.key for c in out] == ["report", "cache_oom"]


def test_a_word_is_no_name_where_another_memory_matches_the_question_better() -> None:
    """"why did the NAS backup break?": the diagnosis holds NAS and backup; a container called
    backup-7f holds only backup."""
    ranked = _texts([_cand("nas", 1.0), _cand("backup_die", 0.9)],
                    {"nas": "The root cause was an expired SSH key on the NAS backup target.",
                     "backup_die": "podman container 'backup-7f' died with exit code 3"})
    out = routed_first(ranked, "why did the NAS backup break?", _subject_rows().get)
    assert [c.key for c in out] == ["nas", "backup_die"]
    assert "named_subject" not in out[1].components
    # the same word, the only one naming anything: the container's end
    ranked = _texts([_cand("nas", 1.0), _cand("backup_die", 0.9)],
                    {"nas": "I fixed it by re-running the nightly backup to the NAS.",
                     "backup_die": "podman container 'backup-7f' died with exit code 3"})
    out = routed_first(ranked, "how did the backup run end?", _subject_rows().get)
    assert [c.key for c in out] == ["backup_die", "nas"]


def test_the_kind_asked_for_leads_within_its_conversation_only() -> None:
    """"how did we fix the wifi?": the wifi conversation's fix takes its cause's place; the NAS
    conversation's fix is no answer and keeps its own, lower score (all three are diagnoses,
    lifted as what the question asks for, above the turn)."""
    rows = {"wifi_cause": Row("diagnosis", "root_cause", {"session": "wifi"}),
            "wifi_fix": Row("diagnosis", "resolution", {"session": "wifi"}),
            "nas_fix": Row("diagnosis", "resolution", {"session": "nas"}),
            "turn": Row("conversation", "turn", {"session": "wifi"})}
    cands = [_cand("wifi_cause", 0.9), _cand("turn", 0.7), _cand("wifi_fix", 0.5),
             _cand("nas_fix", 0.3)]
    for c in cands:
        c.category = rows[c.key].category
    out = routed_first(cands, "how did we fix the flaky wifi?", rows.get)
    assert [c.key for c in out] == ["wifi_fix", "wifi_cause", "nas_fix", "turn"]
    assert "conclusion_kind" not in out[2].components
