"""Which LogQA questions single out their line (eval/logqa_ambiguity.py), on hand-made lines."""

from __future__ import annotations

from eval.logqa_ambiguity import fitting, random_order_answered, random_order_hit, summarise

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
    # no answers given: only the gold line answers, as for Hit@k
    assert out["answered_at_5_fitting_first_random_order"] == round((5 / 8 + 1) / 2, 3)


def test_answered_bound_counts_every_fitting_line_that_answers() -> None:
    assert random_order_answered(8, 1, 5) == 5 / 8
    assert random_order_answered(8, 4, 5) == 1.0  # 4 that do not answer cannot fill 5 places
    assert random_order_answered(8, 2, 1) == 2 / 8
    lines = {f"hdfs:{i}": ("E1", c) for i, c in enumerate(RESPONDERS)}
    asked = {"question": "Is packet responder 2 terminating?", "answer": "terminating",
             "gold": ["hdfs:3"], "scores": {"Hit@1": 0.0}}
    out = summarise([asked], lines, 1)
    assert out["hit_at_1_fitting_first_random_order"] == round(1 / 8, 3)
    assert out["answered_at_1_fitting_first_random_order"] == 1.0  # every line answers it
