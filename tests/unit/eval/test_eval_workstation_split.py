"""The workstation set's dev / held-out halves: a phrasing or a scenario held out makes its
question held-out, and each kind's halves are reported apart."""

from __future__ import annotations

from eval.folds import half_of
from eval.workstation import summarise
from eval.workstation_containers import DISK_PHRASINGS, SCENARIOS, questions
from eval.workstation_kinds import PRESSURE_PHRASINGS, split_of


def test_a_phrasing_or_a_scenario_held_out_holds_the_question_out() -> None:
    dev = [p for p in PRESSURE_PHRASINGS if half_of(p) == "A"]
    held = [p for p in PRESSURE_PHRASINGS if half_of(p) == "B"]
    assert dev and held  # both halves of the phrasings are used
    assert all(split_of(p) == "dev" for p in dev)
    assert all(split_of(p) == "held-out" for p in held)
    assert all(split_of(p, scenario_dev=False) == "held-out" for p in dev)


def test_every_container_scenario_has_a_held_out_twin() -> None:
    kinds = {}
    for scenario, _, dev in SCENARIOS:
        kinds.setdefault(scenario in ("recovers", "degrades") or scenario, set()).add(dev)
    assert all(v == {True, False} for v in kinds.values())
    values = {"containers": [{"scenario": s, "svc": w, "name": f"{w}-x", "dev": d}
                             for s, w, d in SCENARIOS]}
    made = questions(values, lambda text, gold, stale, dev, phrasing: (text, stale, dev))
    assert len(made) >= 60
    # the "now" questions about health have the older state to rank below
    assert all(stale is not None for text, stale, _ in made if "health" in text and "now" in text)
    assert sum(1 for _, _, dev in made if not dev) > len(DISK_PHRASINGS)


def test_each_kind_reports_its_halves() -> None:
    rows = [{"category": "k", "split": "dev", "scores": {"Hit@1": 1.0}},
            {"category": "k", "split": "held-out", "scores": {"Hit@1": 0.0}},
            {"category": "old", "split": "dev", "scores": {"Hit@1": 1.0}}]
    out = summarise(rows)
    assert out["k dev"] == {"n": 1, "Hit@1": 1.0} and out["k held-out"] == {"n": 1, "Hit@1": 0.0}
    assert out["all held-out"]["n"] == 1 and out["all dev"]["n"] == 2
    assert "old dev" not in out  # a kind without held-out questions is reported whole
