"""Which LogQA questions single out their line (eval/logqa_ambiguity.py), on hand-made lines."""

from __future__ import annotations

from eval.logqa_ambiguity import fitting, random_order_hit, summarise

RESPONDERS = [f"PacketResponder 2 for block blk_{i} terminating" for i in range(8)]


def test_a_question_without_the_lines_identifier_fits_every_line_of_its_template() -> None:
    asked = "What is the status of the packet responder 2?"
    assert fitting(asked, RESPONDERS[3], RESPONDERS) == 8
    assert fitting("What is the status of block blk_3?", RESPONDERS[3], RESPONDERS) == 1
    assert fitting("What happened?", RESPONDERS[3], RESPONDERS[3:4]) == 1  # the gold at least


def test_random_order_bound_and_summary() -> None:
    assert random_order_hit(8, 5) == 5 / 8 and random_order_hit(3, 5) == 1.0
    lines = {f"hdfs:{i}": ("E1", c) for i, c in enumerate(RESPONDERS)}
    questions = [
        {"question": "What is the status of the packet responder 2?", "gold": ["hdfs:3"],
         "scores": {"Hit@5": 0.0}},
        {"question": "What is the status of block blk_5?", "gold": ["hdfs:5"],
         "scores": {"Hit@5": 1.0}},
    ]
    out = summarise(questions, lines, 5)
    assert out["fit_more_than_5"] == 1 and out["missed_at_5_fit_more_than_5"] == 1
    assert out["missed_at_5"] == 1
    assert out["hit_at_5_fitting_first_random_order"] == round((5 / 8 + 1) / 2, 3)
