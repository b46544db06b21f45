"""Text that JSON can carry but Unicode cannot (an unpaired surrogate, `"\\ud800"`) is refused with
a 422 and the reason, wherever it sits in a request, never a 500."""

from __future__ import annotations

from collections.abc import Sequence

from test_recall_api import FakeWorld, _client
from totalrecall_schema import MemoryEvent


class EncodingWorld(FakeWorld):
    """A publisher that encodes what it publishes, as JetStream's does."""

    async def publish(self, events: Sequence[MemoryEvent]) -> list[bool]:
        for e in events:
            e.model_dump_json().encode()
        return await super().publish(events)


async def test_an_unpaired_surrogate_in_free_form_content_is_a_422() -> None:
    c = await _client(EncodingWorld())
    turns = ",".join(
        f'{{"role": "{"user" if i % 2 == 0 else "assistant"}", '
        f'"content": [{{"type": "text", "text": "step {i} of the fix \\udaec here"}}]}}'
        for i in range(6))
    body = f'{{"sessionId": "s-1", "messages": [{turns}]}}'
    r = await c.post("/memory/session/end", content=body,
                     headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "unicode" in r.json()["detail"].lower()


async def test_the_handler_names_the_problem() -> None:
    from totalrecall_recall_api.app import create_app
    from totalrecall_recall_api.settings import Settings

    world = EncodingWorld()
    app = create_app(Settings(), publisher=world, store=world, embedder=world, index=world)

    @app.get("/boom")
    async def boom() -> None:
        "x\udaec".encode()

    import httpx

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as h:
        r = await h.get("/boom")
    assert r.status_code == 422
    assert "unpaired surrogate at position 1" in r.json()["detail"]


async def test_a_session_whose_dates_make_no_memory_is_a_422() -> None:
    c = await _client(EncodingWorld())
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} of the talk",
             "timestamp": "0308-12-01T10:00:00+00:00"} for i in range(6)]
    r = await c.post("/memory/session/end", json={"sessionId": "s-2", "messages": msgs})
    assert r.status_code == 422, r.text
    assert "timestamp" in r.json()["detail"]
