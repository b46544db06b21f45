"""The recall bench's CPU bound: what the stack's CPU per recall allows on the machine's cores."""

from __future__ import annotations

from typing import Any

import pytest

from bench import recall_bench
from bench.floor import Floor
from bench.recall_bench import again_lines, cpu_bound_lines, cpu_per_recall, slices


def test_cpu_per_recall_is_each_process_s_cpu_over_the_recalls_in_ms() -> None:
    before = {"recall_api": 10.0, "postgres": 4.0}
    after = {"recall_api": 13.0, "postgres": 5.5, "client": 0.3}  # a process first seen after
    assert cpu_per_recall(before, after, 300) == pytest.approx(
        {"recall_api": 10.0, "postgres": 5.0, "client": 1.0})


def test_the_bound_is_the_cpu_spread_over_every_core_against_the_floor() -> None:
    floor = Floor(p50=3.0, p99=6.0, per_threads={1: (5.0, 9.0), 2: (3.0, 6.0)})
    lines, figures = cpu_bound_lines("recall at 20 memories",
                                     {"recall_api": 12.0, "postgres": 6.0}, 2, floor)
    total, least = figures
    assert total.value == pytest.approx(18.0) and total.raw == {"recall_api": 12.0,
                                                                "postgres": 6.0}
    assert least.value == pytest.approx(3.0)  # 18 ms over 2 cores = 9 ms = 3x a 3 ms floor
    assert "at least 9.0 ms" in lines[0] and "3.00×" in lines[0]
    assert lines[0].index("recall_api") < lines[0].index("postgres")  # the largest first


def test_asked_again_tells_what_a_recall_costs_besides_its_embedding() -> None:
    floor = Floor(p50=4.0, p99=6.0, per_threads={1: (7.0, 9.0), 2: (4.0, 6.0)})
    first = {"recall_api": 20.0, "postgres": 10.0}
    again = ([10.0, 12.0, 14.0], {"recall_api": 11.0, "postgres": 10.0})
    lines, figures = again_lines("recall at 20 memories", again, first, floor, 2)
    by_name = {f.name: f.value for f in figures}
    label = "recall at 20 memories, asked again (question vectors cached)"
    assert by_name[f"{label}: p50"] == pytest.approx(12.0)
    assert by_name[f"{label}: p50 ÷ floor p50"] == pytest.approx(3.0)
    assert by_name[f"{label}: CPU per recall"] == pytest.approx(21.0)
    assert by_name[f"{label}: least mean ÷ floor p50 the CPU allows"] == pytest.approx(21 / 2 / 4)
    assert "3.00× the floor's p50" in lines[0]
    assert any("first time: 9.0 ms more" in line for line in lines)  # 30 - 21


def test_slices_are_contiguous_near_equal_and_never_empty() -> None:
    assert slices(list("abcdefg"), 3) == [list("abc"), list("de"), list("fg")]
    assert slices(list("ab"), 5) == [["a"], ["b"]]


def test_rounds_floor_then_recall_each_part_and_count_the_stack_s_cpu_during_recalls_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, tuple[str, ...]]] = []
    clock = {"recall_api": 0.0, "client": 0.0}
    speed = iter([1.0, 2.0, 1.0])  # the machine at half speed in the second round

    def floor_samples(part: list[str]) -> dict[int, list[float]]:
        events.append(("floor", tuple(part)))
        clock["client"] += 100.0  # the floor's own CPU: never a recall's
        s = next(speed)
        return {1: [5.0 * s] * len(part), 2: [3.0 * s] * len(part)}

    def timed(client: Any, part: list[str]) -> list[float]:
        events.append(("recall", tuple(part)))
        clock["recall_api"] += 0.01 * len(part)
        return [10.0] * len(part)

    monkeypatch.setattr(recall_bench, "floor_samples", floor_samples)
    monkeypatch.setattr(recall_bench, "_timed", timed)
    monkeypatch.setattr(recall_bench, "_stack_cpu", lambda stack: dict(clock))
    lat, floor, cpu = recall_bench._interleaved(None, None, list("abcde"), rounds=3)
    assert events == [("floor", ("a", "b")), ("recall", ("a", "b")), ("floor", ("c", "d")),
                      ("recall", ("c", "d")), ("floor", ("e",)), ("recall", ("e",))]
    assert lat == [10.0] * 5
    assert cpu == pytest.approx({"recall_api": 0.05, "client": 0.0})
    # pooled per thread count: 2 threads 3, 3, 6, 6, 3 ms -> p50 3 ms; p99 the largest
    assert floor.per_threads[2] == (3.0, 6.0) and floor.p50 == 3.0 and floor.p99 == 6.0
