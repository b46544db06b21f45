"""The first questions of a run asked again at its end (`eval.stability`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from eval.report import timing_line
from eval.stability import ASK_AGAIN, Asked, ask_again, ids_of


class _Client:
    """Ranks by a table that the test changes between the two asks."""

    def __init__(self, rankings: dict[str, list[str]]) -> None:
        self.rankings, self.asked = rankings, []  # type: list[tuple[str, datetime | None]]

    def recall(self, query: str, namespace: str, max_results: int = 10,
               timeframe: str = "all", as_of: datetime | None = None,
               ) -> tuple[list[dict[str, Any]], float, dict[str, Any]]:
        self.asked.append((query, as_of))
        return [{"id": i} for i in self.rankings[query][:max_results]], 1.0, {}


def test_a_ranking_that_changed_is_counted_and_warned_about() -> None:
    at = datetime(2023, 5, 8, tzinfo=UTC)
    client = _Client({f"q{i}": ["a", "b", "c"] for i in range(ASK_AGAIN + 5)})
    asked = [Asked(q, "ns", at, ids_of(client.recall(q, "ns", as_of=at)[0]))
             for q in client.rankings]
    client.asked.clear()
    client.rankings["q3"] = ["b", "a", "c"]  # settled otherwise after its first ask
    client.rankings[f"q{ASK_AGAIN + 1}"] = ["c"]  # past the ones asked again
    warnings: list[str] = []
    slept: list[float] = []
    out = ask_again(client, asked, max_results=10, log=warnings.append, not_before=112.0,
                    clock=lambda: 100.0, sleep=slept.append)
    assert slept == [12.0]  # not before the recall API's kept reads have aged out
    assert out == {"asked_again": ASK_AGAIN, "same_ranking": ASK_AGAIN - 1}
    assert [q for q, _ in client.asked] == [f"q{i}" for i in range(ASK_AGAIN)]
    assert {a for _, a in client.asked} == {at}  # at the question's own date again
    assert len(warnings) == 1 and "1 of the first 20" in warnings[0]


def test_a_settled_run_says_so_in_its_report() -> None:
    client = _Client({"q": ["a"]})
    warnings: list[str] = []
    out = ask_again(client, [Asked("q", "ns", None, ("a",))], max_results=10,
                    log=warnings.append)
    assert out == {"asked_again": 1, "same_ranking": 1} and not warnings
    result = {"timing": {"ingest_wall_s": 1, "ingest_turns_per_s": 2, "ingest_post_s": 0.1,
                         "searchable_by": "stats", "query_wall_s": 3, "recall_p50_ms": 4,
                         "recall_p99_ms": 5},
              "counts": {"haystacks": 1, "turns": 2, "questions": 1}, "stability": out}
    assert timing_line(result).endswith(
        "Asked again at the end: 1 of the first 1 questions ranked identically.")
