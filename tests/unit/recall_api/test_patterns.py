"""core/patterns.py: the user's patterns learned from three weeks of real watcher events."""

from __future__ import annotations

import functools
from datetime import UTC, timedelta

from pattern_world import World
from totalrecall_recall_api.core.patterns import (
    Options,
    learn,
    preferred_tools,
    recurring_tasks,
    work_sessions,
)
from totalrecall_schema import Memory, MemoryEvent


def as_stored(e: MemoryEvent) -> Memory:
    """A memory as the store returns it (metadata as a plain dict)."""
    return Memory(id=e.id, score=0.0, timestamp=e.timestamp, category=e.category,
                  subcategory=e.subcategory, summary=e.summary, detail=e.detail,
                  namespace=e.namespace, actor=e.actor, severity=e.metadata.severity.value,
                  tags=list(e.metadata.tags), metadata=e.metadata.model_dump(mode="json"))


@functools.cache
def _world() -> tuple[Memory, ...]:
    return tuple(as_stored(e) for e in World("ns").three_weeks())


def world() -> list[Memory]:
    return [m.model_copy(deep=True) for m in _world()]


def test_work_sessions_are_the_hours_active_on_most_days() -> None:
    rows = world()
    [p] = work_sessions(rows, Options(), UTC)
    assert p.summary == ("User's work sessions: Mon–Fri 09:00–12:00, 14:00–15:00, "
                         "17:00–18:00 (UTC)")
    assert p.observations == 15 and p.confidence == 1.0
    # Evidence: the first activity of each day (the login), newest first, capped.
    logins = [m.id for m in rows if m.subcategory == "login"]
    assert p.evidence == list(reversed(logins))[:20] and len(p.evidence) == 15


def test_preferred_editor_by_count_with_its_evidence() -> None:
    rows = world()
    by_subject = {p.subject: p for p in preferred_tools(rows, Options())}
    editor = by_subject["prefers:editor"]
    assert editor.summary == "User prefers neovim as their editor"
    nvim = {m.id for m in rows if m.metadata.get("process") == "nvim"}
    assert set(editor.evidence) <= nvim and len(editor.evidence) == 20
    assert len(nvim) == 26  # a busy and an exit event on each of 13 days
    assert editor.observations == 13 and editor.confidence == round(13 / 15, 3)
    assert "neovim on 13 of 15 days of editor use (others: vim 2)" in editor.detail
    # A stated preference after the second week: only what came after it counts.
    cut = max(m.timestamp for m in rows) - timedelta(days=3)
    after = preferred_tools(rows, Options(), {"prefers:editor": cut})
    assert all(m.timestamp > cut for p in after for m in rows if m.id in p.evidence
               and p.subject == "prefers:editor")
    # Too few observations: no pattern.
    assert "prefers:editor" not in {p.subject for p in
                                    preferred_tools(rows, Options(min_observations=14))}


def test_recurring_tasks_daily_and_weekly() -> None:
    tasks = {p.summary: p for p in recurring_tasks(world(), Options(), UTC)}
    assert 'User asks: "check the nightly backup report" every Mon around 09:00 (UTC)' in tasks
    weekly = tasks['User asks: "check the nightly backup report" every Mon around 09:00 (UTC)']
    assert weekly.observations == 3 and len(weekly.evidence) == 3
    assert "User runs `docker build` on most days around 11:00 (UTC)" in tasks
    assert tasks["User runs `docker build` on most days around 11:00 (UTC)"].observations == 15


def test_nothing_is_learned_from_too_little() -> None:
    rows = [m for m in world() if m.timestamp < min(r.timestamp for r in world())
            + timedelta(days=2)]
    assert learn(rows, Options(), UTC) == []


def test_pattern_ids_are_deterministic_per_subject_and_text() -> None:
    a = learn(world(), Options(), UTC)
    b = learn(world(), Options(), UTC)
    assert [p.event_id("ns") for p in a] == [p.event_id("ns") for p in b]
    assert len({p.event_id("ns") for p in a}) == len(a)
    assert a[0].event_id("ns") != a[0].event_id("other")
