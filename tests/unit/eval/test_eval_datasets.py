"""Loaders and data-quirk normalisation of the evaluation (no network, tiny synthetic files)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from eval.datasets import (
    MAX_SUMMARY_CHARS,
    Turn,
    load_locomo,
    load_longmemeval,
    namespace_for,
    normalise_evidence,
    parse_lme_date,
    parse_locomo_date,
)


@pytest.mark.parametrize(("raw", "want"), [
    (["D1:3"], ["D1:3"]),
    (["D8:6; D9:17"], ["D8:6", "D9:17"]),
    (["D8:6 D9:17"], ["D8:6", "D9:17"]),
    (["D8:6, D9:17", "D8:6"], ["D8:6", "D9:17"]),
    (["D:11:26"], ["D11:26"]),
    (["D30:05"], ["D30:5"]),
    (["D", "D1:20"], ["D1:20"]),
    ("D2:1", ["D2:1"]),
    ([], []),
    (None, []),
])
def test_normalise_evidence(raw: object, want: list[str]) -> None:
    assert normalise_evidence(raw) == want  # type: ignore[arg-type]


def test_parse_dates() -> None:
    assert parse_locomo_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_locomo_date("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9,
                                                                          tzinfo=UTC)
    assert parse_locomo_date("12:30 pm on 1 Jan, 2022").hour == 12
    assert parse_lme_date("2023/05/20 (Sat) 01:44") == datetime(2023, 5, 20, 1, 44, tzinfo=UTC)
    assert parse_lme_date("2023/05/20") == datetime(2023, 5, 20, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_locomo_date("yesterday")


def _locomo(tmp_path: Path) -> Path:
    sample = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a dog"},
            ],
            "session_2_date_time": "9:00 am on 10 May, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "The dog is called Rex."}],
        },
        "qa": [
            {"question": "What pet?", "answer": "dog", "category": 4, "evidence": ["D1:1; D2:01"]},
            {"question": "Name?", "answer": "Rex", "category": 1, "evidence": ["D:2:1", "D9:9"]},
            {"question": "Nothing?", "answer": "x", "category": 3, "evidence": []},
            {"question": "Only bad?", "answer": "x", "category": 2, "evidence": ["D7:7", "D"]},
            {"question": "Adv?", "adversarial_answer": "y", "category": 5, "evidence": ["D1:2"]},
        ],
    }
    p = tmp_path / "locomo.json"
    p.write_text(json.dumps([sample]))
    return p


def test_load_locomo(tmp_path: Path) -> None:
    [h] = load_locomo(_locomo(tmp_path))
    assert h.key == "conv-1"
    assert [t.id for t in h.turns] == ["D1:1", "D1:2", "D2:1"]
    assert h.turns[1].full_text == "Bob: Nice! [image: a dog]"
    assert h.turns[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert h.turns[2].session == "D2" and h.session_of["D2:1"] == "D2"
    qs = {q.question: q for q in h.questions}
    assert set(qs) == {"What pet?", "Name?", "Adv?"}          # no-evidence questions skipped
    assert qs["What pet?"].gold == {"D1:1", "D2:1"}
    assert qs["Name?"].gold == {"D2:1"}                       # non-existent D9:9 dropped
    assert qs["Adv?"].category == "5" and qs["Adv?"].answer == "y"
    [h2] = load_locomo(_locomo(tmp_path), categories={"1", "4"})
    assert {q.category for q in h2.questions} == {"1", "4"}


def _lme(tmp_path: Path) -> Path:
    rows = [
        {"question_id": "q1", "question_type": "single-session-user", "question": "Where?",
         "answer": "Paris", "question_date": "2023/06/01 (Thu) 10:00",
         "haystack_session_ids": ["s_a", "s_b", "s_a"],
         "haystack_dates": ["2023/05/20 (Sat) 01:44", "2023/05/21 (Sun) 02:00",
                            "2023/05/22 (Mon) 03:00"],
         "haystack_sessions": [
             [{"role": "user", "content": "I moved to Paris.", "has_answer": True},
              {"role": "assistant", "content": "Great city."}],
             [{"role": "user", "content": "Unrelated."}],
             [{"role": "user", "content": "I moved to Paris.", "has_answer": True},
              {"role": "assistant", "content": "Great city."}],
         ],
         "answer_session_ids": ["s_a"]},
        {"question_id": "q2_abs", "question_type": "multi-session", "question": "?",
         "answer": "", "question_date": "2023/06/01 (Thu) 10:00", "haystack_session_ids": [],
         "haystack_dates": [], "haystack_sessions": [], "answer_session_ids": []},
    ]
    p = tmp_path / "lme.jsonl.gz"
    with gzip.open(p, "wt") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return p


def test_load_longmemeval(tmp_path: Path) -> None:
    [h] = load_longmemeval(_lme(tmp_path))                   # _abs skipped
    assert h.key == "q1"
    assert len(h.turns) == 5 and len(h.unique_turns()) == 3   # repeated session dedupes by id
    [q] = h.questions
    assert q.gold == {"s_a:0"} and q.gold_sessions == {"s_a"}
    assert h.turns[0].full_text == "user: I moved to Paris."
    assert h.turns[1].timestamp == datetime(2023, 5, 20, 1, 44, 1, tzinfo=UTC)   # + turn index s
    assert h.session_of["s_b:0"] == "s_b"


def test_ingest_event_fits_the_api() -> None:
    from totalrecall_schema.api import IngestEvent

    long = Turn(id="s1:0", session="s1", index=0, speaker="assistant", text="word " * 3000,
                timestamp=datetime(2023, 5, 20, tzinfo=UTC))
    summary, detail = long.summary_detail()
    assert len(summary) <= MAX_SUMMARY_CHARS and detail
    assert (summary + " " + detail).split() == long.full_text.split()
    ev = long.to_ingest("ev1.q1")
    IngestEvent(**ev)                                         # valid against the contract
    assert ev["id"] == "s1:0" and ev["category"] == "conversation" and ev["subcategory"] == "turn"
    assert ev["timestamp"].startswith("2023-05-20T00:00:00")
    short = Turn(id="D1:1", session="D1", index=0, speaker="Ann", text="hi",
                 timestamp=datetime(2023, 5, 20, tzinfo=UTC))
    assert "detail" not in short.to_ingest("ns")


def test_namespace_for() -> None:
    import re

    pat = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    assert namespace_for("ev12ab", "conv-26") == "ev12ab.conv-26"
    for key in ("gpt4_372c3eed", "weird key/with:chars", "x" * 100, "_lead"):
        ns = namespace_for("ev12ab", key)
        assert pat.match(ns), ns
    assert namespace_for("t", "x" * 100) != namespace_for("t", "x" * 99 + "y")
