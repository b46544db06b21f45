"""The driver of the model-adaptation study (eval/model_adapt.py): its dense score, and the job
it hands the torch half (eval/adapt_train.py) and reads back, with a stand-in trainer."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from eval import model_adapt
from eval.model_adapt import dense_recall, hard_negatives


def test_dense_recall_is_the_share_of_gold_rows_among_the_nearest() -> None:
    docs = np.eye(4)
    questions = np.array([[1.0, 0.9, 0.0, 0.0], [0.0, 0.0, 0.1, 1.0]])
    gold = [[0, 2], [3]]
    assert dense_recall(questions, docs, gold, 1).tolist() == [0.5, 1.0]
    assert dense_recall(questions, docs, gold, 2).tolist() == [0.5, 1.0]
    assert dense_recall(questions, docs, gold, 3).tolist() == [1.0, 1.0]


def test_hard_negatives_are_the_nearest_memories_that_are_not_gold() -> None:
    docs = np.eye(5)
    questions = np.array([[0.9, 0.8, 0.1, 0.5, 0.0]])
    assert hard_negatives(questions, docs, [[0]], 2) == [[1, 3]]
    assert hard_negatives(questions, docs, [[1, 3]], 3) == [[0, 2, 4]]


STAND_IN = """
import json, sys
import numpy as np
job = json.load(open(sys.argv[1]))
tuned = 1.0 if job["train"] else 0.0
np.savez(sys.argv[2], **{name: np.array([[len(t), tuned] for t in texts], dtype=np.float32)
                         for name, texts in job["embed"].items()})
"""


def test_a_job_reaches_the_trainer_and_its_vectors_come_back(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = tmp_path / "trainer.py"
    trainer.write_text(STAND_IN)
    monkeypatch.setattr(model_adapt, "TRAINER", trainer)
    job = {"model": "weights", "settings": {}, "train": [{"key": "conv"}],
           "embed": {"conv/questions": ["why", "what now"], "conv/docs": ["a turn"]}}
    out = model_adapt._run(sys.executable, job)
    assert sorted(out) == ["conv/docs", "conv/questions"]
    assert out["conv/questions"].tolist() == [[3.0, 1.0], [8.0, 1.0]]
    assert out["conv/docs"].tolist() == [[6.0, 1.0]]


def test_a_failing_trainer_fails_the_study(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = tmp_path / "trainer.py"
    trainer.write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(model_adapt, "TRAINER", trainer)
    with pytest.raises(Exception, match="returned non-zero exit status 3"):
        model_adapt._run(sys.executable, {"model": "", "settings": {}, "train": [], "embed": {}})
