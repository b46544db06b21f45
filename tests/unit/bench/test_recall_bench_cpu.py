"""The recall bench's CPU bound: what the stack's CPU per recall allows on the machine's cores."""

from __future__ import annotations

import pytest

from bench.floor import Floor
from bench.recall_bench import again_lines, cpu_bound_lines, cpu_per_recall


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
