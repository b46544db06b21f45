"""The workstation scenario set (eval/workstation.py) against the e2e stack: real CPU hogs, a unit
failing after its cause, a config edit, a disk filler, a pip install, an SSH failure burst — made
on this machine and seen by the watchers — then the behaviours an OS agent relies on."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stacklib import Api

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: eval/
from eval.client import RecallClient  # noqa: E402
from eval.workstation import NAMESPACE, Paths, World, make_events, questions  # noqa: E402


@pytest.fixture(scope="module")
def world(stack: Api) -> Iterator[tuple[RecallClient, World]]:
    if stack.watched_dir is None or stack.app_log is None:
        pytest.skip("an external stack: no watched directory / log of ours")
    client = RecallClient(stack.url, token=stack.token)
    # generous: events reach recall within seconds, but a loaded 2-core machine can take minutes
    w = make_events(client, Paths(stack.watched_dir, stack.app_log), timeout=240)
    yield client, w
    w.stop()
    client.close()


def _recall(client: RecallClient, q: str, n: int = 10) -> list[dict[str, Any]]:
    return client.recall(q, NAMESPACE, max_results=n)[0]


def _rank(mems: list[dict[str, Any]], pred: Any) -> int | None:
    return next((i for i, m in enumerate(mems) if pred(m)), None)


def _q(w: World, kind: str, contains: str) -> Any:
    return next(q for q in questions(w) if q.kind == kind and contains in q.question)


def test_an_exited_process_is_not_using_cpu_now(world: tuple[RecallClient, World]) -> None:
    client, w = world
    q = _q(w, "now-state", "using my CPU right now")
    # On a busy machine (the rest of the suite, a parallel run) other processes really are
    # using the CPU now and fill the first ten: what must hold is the order of the two hogs.
    mems = _recall(client, q.question, n=50)
    now, old = _rank(mems, q.gold), _rank(mems, q.stale)
    assert now is not None, [m["summary"] for m in mems]
    assert old is None or now < old, [m["summary"] for m in mems]


def test_a_failure_comes_with_its_cause(world: tuple[RecallClient, World]) -> None:
    client, w = world
    q = _q(w, "why-failed", "why did backup-")
    mems = _recall(client, q.question)
    unit = f"backup-{w.m['unit']}.service"
    assert _rank(mems, lambda m: unit in m["summary"] and m["subcategory"] == "fail") is not None
    cause = _rank(mems, q.gold)
    assert cause is not None and cause < 5, [m["summary"] for m in mems]


def test_the_newest_near_duplicate_first(world: tuple[RecallClient, World]) -> None:
    """Needs the lead's change (numbers-only near-duplicates kept apart, the newest first)."""
    client, w = world
    q = _q(w, "disk", "how full is")
    mems = _recall(client, q.question)
    new, old = _rank(mems, q.gold), _rank(mems, q.stale)
    assert new is not None and (old is None or new < old), [m["summary"] for m in mems]


def test_every_failed_login_ip_is_findable(world: tuple[RecallClient, World]) -> None:
    client, w = world
    missing = [ip for ip in w.ips
               if _rank(_recall(client, f"failed ssh login from {ip}"),
                        lambda m, ip=ip: ip in m["summary"] + m.get("detail", "")) is None]
    assert not missing, f"not findable by address: {missing}"


def test_the_config_edit_before_a_failure(world: tuple[RecallClient, World]) -> None:
    client, w = world
    q = _q(w, "changed-before", "what changed before")
    mems = _recall(client, q.question)
    rank = _rank(mems, q.gold)
    assert rank is not None and rank < 5, [m["summary"] for m in mems]
