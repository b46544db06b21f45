"""The namespace prefix of an eval run (`eval/__main__.py`): fixed in a stack of its own, so
that one code ranks the same in every fresh run; fresh per run against a shared stack. The
workstation set's made-up names follow it."""

from __future__ import annotations

from totalrecall_schema.events import memory_key

from eval.__main__ import OWN_STACK_TAG, default_tag


def test_a_run_in_its_own_stack_takes_the_same_prefix_every_time() -> None:
    assert default_tag(True) == default_tag(True) == OWN_STACK_TAG


def test_runs_against_a_shared_stack_take_fresh_prefixes() -> None:
    assert len({default_tag(False) for _ in range(20)}) == 20


def test_the_prefix_decides_the_keys_that_break_ties() -> None:
    # Why the prefix matters to a ranking: keys (the last tie-break) follow the namespace.
    assert memory_key("ev.spark", "spark:1") == memory_key("ev.spark", "spark:1")
    assert memory_key("ev.spark", "spark:1") != memory_key("evab12cd.spark", "spark:1")


def test_the_workstation_sets_made_up_names_follow_the_runs_tag() -> None:
    # Its names and addresses are words of its questions: the same tag, the same questions.
    from eval import workstation

    def names(tag: str) -> list[str]:
        workstation.RNG.seed(f"workstation:{tag}")
        return [workstation.marker() for _ in range(5)]

    assert names(OWN_STACK_TAG) == names(OWN_STACK_TAG)
    assert names(OWN_STACK_TAG) != names(default_tag(False))
