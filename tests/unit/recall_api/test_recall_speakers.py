"""A question is embedded without the names of who speaks in the namespace's conversations."""

from __future__ import annotations

import pytest
from test_recall_api import FakeWorld, _client
from totalrecall_recall_api.core.speakers import speaker_names, without_speakers
from totalrecall_schema import MemoryEvent

SPEAKERS = frozenset({"caroline", "melanie", "jon"})


@pytest.mark.parametrize(("query", "asked"), [
    ("What did Caroline research?", "What did research?"),
    ("What is Caroline's favourite book?", "What is favourite book?"),  # the possessive
    ("What do Jon and Gina both have in common?", "What do and Gina both have in common?"),
    ("When did Melanie paint a sunrise?", "When did paint a sunrise?"),
    ("what did CAROLINE say about caroline’s kids", "what did say about kids"),
    ("What did Jonathan say?", "What did Jonathan say?"),  # another name: a whole word only
    ("why did nginx fail?", "why did nginx fail?"),  # nothing named: as asked
    ("Caroline?", "Caroline?"),  # nothing but the name: as asked
    ("Caroline and Melanie", "Caroline and Melanie"),  # one word would be left: as asked
])
def test_without_speakers(query: str, asked: str) -> None:
    assert without_speakers(query, SPEAKERS) == asked


def test_a_name_that_is_a_common_word_is_a_name_with_its_capital_only() -> None:
    speakers = frozenset({"will", "may", "caroline"})
    assert without_speakers("What will Caroline do when Will visits?", speakers) == \
        "What will do when visits?"
    assert without_speakers("what may happen to may's car", speakers) == \
        "what may happen to may's car"


def test_no_speakers_known_leaves_the_question() -> None:
    assert without_speakers("What did Caroline research?", frozenset()) == \
        "What did Caroline research?"


def test_the_generic_actors_are_no_names() -> None:
    """A user's conversation with its assistant keeps every word: "what did the assistant
    suggest for my user account?" is about the assistant's words."""
    assert speaker_names(["user", "Assistant", "system", "agent", "Caroline", " ", ""]) == \
        frozenset({"caroline"})


async def _asked(world: FakeWorld, query: str, **settings: object) -> str:
    client = await _client(world, **settings)
    try:
        r = await client.post("/memory/recall", json={"query": query, "namespace": "talk"})
        assert r.status_code == 200, r.text
    finally:
        await client._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]
        await client.aclose()
    return world.embed_calls[-1][0]


class SpeakingWorld(FakeWorld):
    """A store that knows who speaks in each namespace's conversations."""

    def __init__(self) -> None:
        super().__init__()
        self.speaker_reads = 0

    async def speakers(self, namespace: str) -> list[str]:
        self.speaker_reads += 1
        return sorted({e.actor for e in self.events.values()
                       if e.namespace == namespace and e.category == "conversation"})


def _turn(i: int, actor: str, text: str, namespace: str = "talk") -> MemoryEvent:
    return MemoryEvent(id=f"t{i}", namespace=namespace, category="conversation",
                       subcategory="turn", actor=actor, summary=f"{actor}: {text}")


async def test_the_vector_search_is_asked_without_the_speakers_names() -> None:
    world = SpeakingWorld()
    for e in [_turn(1, "Caroline", "I researched adoption agencies"),
              _turn(2, "Melanie", "Hey Caroline!"), _turn(3, "user", "hello"),
              _turn(4, "Gina", "not this namespace's", namespace="other")]:
        world.events[e.id] = e
    assert await _asked(world, "What did Caroline research?") == "What did research?"
    # Gina speaks in another namespace only: her name stays
    assert await _asked(world, "What did Gina research?") == "What did Gina research?"
    # turned off: as asked
    assert await _asked(world, "What did Caroline research?",
                        embed_without_speakers=False) == "What did Caroline research?"


async def test_the_speakers_are_read_once_per_cache_period() -> None:
    world = SpeakingWorld()
    world.events["t1"] = _turn(1, "Caroline", "I researched adoption agencies")
    client = await _client(world)
    try:
        for q in ("What did Caroline research?", "What did Caroline paint?"):
            r = await client.post("/memory/recall", json={"query": q, "namespace": "talk"})
            assert r.status_code == 200, r.text
    finally:
        await client._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]
        await client.aclose()
    assert world.speaker_reads == 1
    assert [t for t, _ in world.embed_calls][-2:] == ["What did research?", "What did paint?"]


async def test_a_recall_does_not_wait_for_the_speakers_to_be_read_again() -> None:
    """Once a namespace's speakers are known, an expired list is used at once and read again
    behind the recall: an agent asking less often than the cache keeps never waits for it."""
    import asyncio

    class SlowWorld(SpeakingWorld):
        def __init__(self) -> None:
            super().__init__()
            self.gate = asyncio.Event()

        async def speakers(self, namespace: str) -> list[str]:
            if self.speaker_reads >= 1:  # every read but the first waits for the gate
                self.speaker_reads += 1
                await self.gate.wait()
                return ["Caroline", "Melanie"]
            return await super().speakers(namespace)

    world = SlowWorld()
    world.events["t1"] = _turn(1, "Caroline", "I researched adoption agencies")
    client = await _client(world, speakers_cache_s=1e-9)  # expired at once
    try:
        for q in ("What did Caroline research?", "What did Melanie paint?"):
            r = await asyncio.wait_for(
                client.post("/memory/recall", json={"query": q, "namespace": "talk"}), 10)
            assert r.status_code == 200, r.text
        assert world.speaker_reads == 2  # the refresh started, and is still waiting
        # the second recall used the list it had: Melanie was not known yet
        assert [t for t, _ in world.embed_calls][-2:] == [
            "What did research?", "What did Melanie paint?"]
        world.gate.set()
    finally:
        await client._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]
        await client.aclose()
