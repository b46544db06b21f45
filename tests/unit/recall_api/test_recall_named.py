"""An exact identifier in the question ranks its memories first."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from totalrecall_recall_api.core.fusion import Candidate
from totalrecall_recall_api.core.named import named_first, named_identifiers

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("query", "want"), [
    ("what happened to blk_-5623176793330377570?", {"blk_-5623176793330377570"}),
    ("which user tried from 183.62.140.253?", {"183.62.140.253"}),
    ("Is partition rdd_42_18 found?", {"rdd_42_18"}),
    ("What stage was the task 28.0 completed in?", {"28.0"}),
    ("what is pid 4182633 doing", {"4182633"}),
    ("what did I do on the 3rd of May 2023 at 8:30 or 10am, 3 times?", set()),
    # a short number the question says the kind of: a process, a port
    ("what happened to process 1130?", {"1130"}),
    ("what is PID 812 doing, and who listens on port 22?", {"812", "22"}),
    ("which processes ran 3 times in 2023?", set()),
])
def test_telling_identifiers_only(query: str, want: set[str]) -> None:
    assert named_identifiers(query) == want


def test_the_memory_naming_the_identifier_comes_first() -> None:
    alike = Candidate("alike", T0, "BLOCK* ask 10.250.10.213:50010 to delete blk_40291 blk_-5471",
                      score=0.52)
    exact = Candidate("exact", T0, "PacketResponder 1 for block blk_38865049064139660 terminating",
                      score=0.50)
    other = Candidate("other", T0, "nothing to do with it", score=0.1)
    out = named_first([alike, exact, other], "what happened to blk_38865049064139660?")
    assert [c.key for c in out] == ["exact", "alike", "other"]
    assert out[0].components["named"] == pytest.approx(0.52)


def test_more_identifiers_named_rank_higher() -> None:
    one = Candidate("one", T0, "Failed password for root from 10.0.0.7 port 22", score=0.9)
    two = Candidate("two", T0, "Failed password for admin from 10.0.0.7 port 49870", score=0.3)
    out = named_first([one, two], "admin from 10.0.0.7 port 49870?")
    assert [c.key for c in out] == ["two", "one"]


def test_a_question_without_identifiers_changes_nothing() -> None:
    one = Candidate("one", T0, "Failed password for root from 10.0.0.7 port 22", score=0.9)
    two = Candidate("two", T0, "Failed password for admin from 10.0.0.8 port 49870", score=0.3)
    out = named_first([two, one], "who failed to log in?")
    assert [(c.key, c.score) for c in out] == [("two", 0.3), ("one", 0.9)]
    assert all("named" not in c.components for c in out)
