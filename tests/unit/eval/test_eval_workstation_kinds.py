"""The reclaimable kind's gold (`eval/workstation_kinds.py`): a question that names what to clean
asks for the machine's report; one that does not is answered by the container engine's too."""

from __future__ import annotations

import pytest

from eval.workstation_kinds import reclaimable_question_gold

MACHINE = {"category": "system.storage", "subcategory": "reclaimable",
           "summary": "16.0 MiB of disk space could be reclaimed (not deleted): systemd journal"}
ENGINE = {"category": "system.container", "subcategory": "disk",
          "summary": "podman container storage: 120.6 GB could be reclaimed (podman system prune)"}
ENGINE_FULL = {"category": "system.container", "subcategory": "disk",
               "summary": "podman container storage: its storage reached 60 GB (threshold 50 GB)"}


@pytest.mark.parametrize("phrasing", [
    "how big is the journal?", "which caches are taking up disk?", "is the apt cache big?",
    "how big are the logs?", "what temporary stuff can I throw away?"])
def test_a_question_naming_what_to_clean_asks_for_the_machines_report(phrasing: str) -> None:
    gold = reclaimable_question_gold(phrasing)
    assert gold(MACHINE) and not gold(ENGINE)


@pytest.mark.parametrize("phrasing", [
    "is there anything I can prune?", "what's reclaimable right now?",
    "what's eating disk in /var?"])
def test_a_general_question_is_answered_by_either_report(phrasing: str) -> None:
    gold = reclaimable_question_gold(phrasing)
    assert gold(MACHINE) and gold(ENGINE)
    assert not gold(ENGINE_FULL)  # full, but nothing said to be reclaimable
