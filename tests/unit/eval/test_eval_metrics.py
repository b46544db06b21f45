"""Metric computation of the evaluation, against hand-computed values."""

from __future__ import annotations

import pytest

from eval import metrics as M
from eval.client import make_id_resolver, namespace_count, probe_turns, ranked_ids
from eval.runner import check_targets, summarise


def test_locomo_scores() -> None:
    ranked = ["a", "x", "b", "y", "z", "c", "q", "r", "s", "t"]
    s = M.locomo_scores(ranked, {"a", "b", "c"})
    assert s["R@5"] == pytest.approx(2 / 3)
    assert s["R@10"] == pytest.approx(1.0)
    assert s["Hit@5"] == 1.0
    assert s["MRR"] == 1.0
    s = M.locomo_scores(["x", "y", "g"], {"g", "h"})
    assert s == {"R@5": 0.5, "R@10": 0.5, "Hit@5": 1.0, "MRR": pytest.approx(1 / 3)}
    s = M.locomo_scores(["x"] * 0 + ["p"] * 5 + ["g"], {"g"})
    assert s["Hit@5"] == 0.0 and s["R@10"] == 1.0 and s["MRR"] == pytest.approx(1 / 6)
    assert M.locomo_scores([], {"g"})["MRR"] == 0.0


def test_longmemeval_scores_session_dedupes() -> None:
    session_of = {"s1:0": "s1", "s1:1": "s1", "s2:0": "s2", "s3:0": "s3", "s4:0": "s4",
                  "s5:0": "s5", "s6:0": "s6", "s6:1": "s6"}
    # sessions in order: s1, s2, s3, s4, s5, s6 → s6 is the 6th distinct session (not in top 5)
    ranked = ["s1:0", "s1:1", "s2:0", "s3:0", "s4:0", "s5:0", "s6:1"]
    s = M.longmemeval_scores(ranked, {"s6:1"}, {"s6"}, session_of)
    assert s["session_any@5"] == 0.0 and s["session_MRR"] == pytest.approx(1 / 6)
    assert s["turn_any@5"] == 0.0 and s["turn_MRR"] == pytest.approx(1 / 7)
    s = M.longmemeval_scores(ranked, {"s1:1", "s2:0"}, {"s2", "s1"}, session_of)
    assert s["session_any@5"] == 1.0 and s["session_all@5"] == 1.0
    assert s["turn_any@5"] == 1.0 and s["turn_all@5"] == 1.0 and s["turn_MRR"] == 0.5
    s = M.longmemeval_scores(ranked, {"s1:1", "s6:0"}, {"s1"}, session_of)
    assert s["turn_any@5"] == 1.0 and s["turn_all@5"] == 0.0
    # no gold turns: session metrics only
    assert "turn_any@5" not in M.longmemeval_scores(ranked, set(), {"s1"}, session_of)


def test_aggregate_and_summary() -> None:
    per_q = [
        {"category": "1", "scores": {"R@5": 1.0, "R@10": 1.0, "Hit@5": 1.0, "MRR": 1.0}},
        {"category": "4", "scores": {"R@5": 0.0, "R@10": 0.5, "Hit@5": 0.0, "MRR": 0.1}},
        {"category": "5", "scores": {"R@5": 0.0, "R@10": 0.0, "Hit@5": 0.0, "MRR": 0.0}},
    ]
    s = summarise("locomo", per_q)
    assert s["cats 1-4"] == {"n": 2, "R@5": 0.5, "R@10": 0.75, "Hit@5": 0.5, "MRR": 0.55}
    assert s["5 adversarial"]["n"] == 1 and "2 temporal" not in s
    t = check_targets("locomo", s)
    assert t["R@10"] == {"target": 0.85, "value": 0.75, "met": False}
    lme = summarise("longmemeval", [
        {"category": "a", "scores": {"session_any@5": 1.0, "turn_any@5": 1.0}},
        {"category": "b", "scores": {"session_any@5": 0.0}},
    ])
    assert lme["all"]["session_any@5"] == 0.5 and lme["all"]["turn_any@5"] == 1.0


def test_percentile() -> None:
    vals = list(range(1, 101))
    assert M.percentile(vals, 50) == 50
    assert M.percentile(vals, 99) == 99
    assert M.percentile([], 50) == 0.0
    assert M.percentile([7.0], 99) == 7.0


def test_id_resolution() -> None:
    from datetime import UTC, datetime

    from eval.datasets import Turn

    ts = datetime(2023, 1, 1, tzinfo=UTC)
    turns = [Turn(id=f"D1:{i}", session="D1", index=i - 1, speaker="A", text=f"t{i}", timestamp=ts)
             for i in range(1, 4)]
    resolve = make_id_resolver("ns1", turns)
    from totalrecall_schema import memory_key

    mems = [{"id": "D1:2"}, {"id": memory_key("ns1", "D1:3")}, {"id": "zzz"},
            {"id": "other", "metadata": {"session": "D1", "turn": 0}}, {"id": "D1:2"}]
    assert ranked_ids(mems, resolve) == ["D1:2", "D1:3", "D1:1"]
    # A conclusion the recall API derived from a turn finds that turn (once).
    derived = [{"id": "concl-ab12", "metadata": {"derived_from": "D1:3", "session": "D1"}},
               {"id": "D1:3"}, {"id": "concl-cd34", "metadata": {"derived_from": "elsewhere"}}]
    assert ranked_ids(derived, resolve) == ["D1:3"]


def test_namespace_count_shapes() -> None:
    assert namespace_count({"namespaces": {"a": 3, "b": 5}}, "b") == 5
    assert namespace_count({"namespaces": {"a": {"count": 7}}}, "a") == 7
    assert namespace_count({"namespaces": [{"namespace": "a", "total": 2}]}, "a") == 2
    assert namespace_count({"namespace": "a", "count": 9, "by_category": {}}, "a") == 9
    assert namespace_count({"total": 100}, "a") is None
    assert namespace_count(None, "a") is None


def test_probe_turns_spread() -> None:
    from datetime import UTC, datetime

    from eval.datasets import Turn

    ts = datetime(2023, 1, 1, tzinfo=UTC)
    turns = [Turn(id=f"D1:{i}", session="D1", index=i, speaker="A",
                  text=f"a reasonably distinctive sentence number {i} here", timestamp=ts)
             for i in range(20)]
    probes = probe_turns(turns, 5)
    assert len(probes) == 5 and probes[0].id == "D1:0" and probes[-1].id == "D1:19"


def test_a_namespace_is_ready_once_keyword_search_counts_all_of_it() -> None:
    """Stored is not enough: until the word counts cover the whole load, its ranking is that of
    a part of it, different from run to run."""
    from datetime import UTC, datetime

    from eval.client import SearchableWaiter
    from eval.datasets import Turn

    ts = datetime(2023, 1, 1, tzinfo=UTC)
    turns = [Turn(id=f"D1:{i}", session="D1", index=i, speaker="A", text=f"line {i}",
                  timestamp=ts) for i in range(10)]
    answers = iter([{"namespace": "a", "total": 10, "keyword_statistics": {"memories": 6}},
                    {"namespace": "a", "total": 10, "keyword_statistics": {"memories": 10}},
                    {"namespace": "a", "total": 10}])

    class Client:
        def stats(self, namespace: str) -> object:
            return next(answers)

    waiter = SearchableWaiter(Client(), {"a": turns}, log=lambda _: None)  # type: ignore[arg-type]
    assert waiter._ready_by_stats("a") is False  # stored, words counted over 6 of 10
    assert waiter._ready_by_stats("a") is True
    assert waiter._ready_by_stats("a") is True  # an API without the figure: stored is enough


def test_questions_wait_for_the_hnsw_builds_the_load_called_for() -> None:
    """Searchable is not enough either: a question asked before a tier's graph is built is
    searched otherwise than one asked after it."""
    from datetime import UTC, datetime

    from eval.client import SearchableWaiter
    from eval.datasets import Turn

    ts = datetime(2023, 1, 1, tzinfo=UTC)
    turns = [Turn(id="D1:0", session="D1", index=0, speaker="A", text="line", timestamp=ts)]
    index = iter([{"builds": {"warm": "due"}}, {"builds": {"warm": "running"}}, {"builds": {}}])
    asked: list[str | None] = []

    class Client:
        def stats(self, namespace: str | None = None) -> object:
            asked.append(namespace)
            if namespace is not None:
                return {"namespace": namespace, "total": 1}
            return {"index": next(index)}

    logged: list[str] = []
    waiter = SearchableWaiter(Client(), {"a": turns}, log=logged.append)  # type: ignore[arg-type]
    waiter.wait(timeout=10, every=0)
    assert asked == ["a", None, None, None]
    assert logged and "warm" in logged[0]
