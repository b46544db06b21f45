"""The worker runtime's tasks and shutdown order, and the small NATS steps (fakes only)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from totalrecall_worker import (
    ConcurrentResponder,
    WorkerRuntime,
    confirm_subscriptions,
    dead_letter_then_ack,
    json_response,
    raw_body,
)
from waiting import wait_for


class Msg:
    def __init__(self, data: bytes = b"", reply: str = "") -> None:
        self.data, self.reply = data, reply
        self.acked, self.naks, self.responses = False, [], []

    async def ack(self) -> None:
        self.acked = True

    async def nak(self, delay: float | None = None) -> None:
        self.naks.append(delay)

    async def respond(self, data: bytes) -> None:
        self.responses.append(data)


async def test_stop_drains_then_cancels_in_order() -> None:
    rt = WorkerRuntime()
    rt.start()
    events: list[str] = []
    wake, waiting = asyncio.Event(), asyncio.Event()

    async def drained() -> None:
        waiting.set()
        while rt.running:
            await wake.wait()
        events.append("drained ended by itself")

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    rt.spawn(drained(), name="drained", drain_s=5, wake=wake.set)
    rt.spawn(forever(), name="forever")
    rt.ready = True
    await waiting.wait()  # the drained task waits for its wake-up when the stop comes
    await rt.stop()
    assert events == ["drained ended by itself", "cancelled"]
    assert not rt.ready and not rt.running


async def test_a_drained_task_that_overstays_is_cancelled(caplog: pytest.LogCaptureFixture) -> None:
    rt = WorkerRuntime()
    rt.start()
    rt.spawn(asyncio.Event().wait(), name="stuck", drain_s=0.05)
    with caplog.at_level(logging.WARNING, "totalrecall.worker"):
        await rt.stop()
    assert "stuck did not end within 0.1s: cancelled" in caplog.text


async def test_a_task_that_loses_a_cancellation_is_still_stopped(
        caplog: pytest.LogCaptureFixture) -> None:
    """Python 3.11's `wait_for` returns a reply that lands with the cancellation (as nats-py's
    "no responders" does) and drops the cancellation: a loop that catches the reply's error
    carries on. The shutdown cancels again rather than wait for it forever."""
    rt = WorkerRuntime()
    rt.start()
    replies: list[asyncio.Future[None]] = []
    asked = asyncio.Event()

    async def retry_loop() -> None:  # as the indexer's re-index loop, asking the embedder
        while True:
            reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            replies.append(reply)
            asked.set()
            with contextlib.suppress(LookupError):  # "no responders": retried
                await asyncio.wait_for(reply, timeout=30)

    task = rt.spawn(retry_loop(), name="re-index")
    await asked.wait()
    replies[0].set_exception(LookupError("no responders"))
    with caplog.at_level(logging.WARNING, "totalrecall.worker"):
        # stop() cancels the loop in the same loop iteration as the reply lands
        await asyncio.wait_for(rt.stop(), timeout=10)
    assert task.cancelled()
    if sys.version_info < (3, 12):  # the loss this guards against
        assert len(replies) >= 2
        assert "re-index ignored" in caplog.text


async def test_every_survives_failures(caplog: pytest.LogCaptureFixture) -> None:
    rt = WorkerRuntime()
    calls = 0

    async def tick() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("no luck")

    with caplog.at_level(logging.ERROR, "totalrecall.worker"):
        rt.every(0.01, tick, what="gauge")
        await wait_for(lambda: calls >= 3, timeout=10, what="three ticks, each failing")
        await rt.stop()
    assert calls >= 3 and "gauge failed" in caplog.text


async def test_dead_letter_then_ack() -> None:
    parked = []

    async def publish() -> None:
        parked.append(1)

    m = Msg()
    assert await dead_letter_then_ack(m, publish, 2.0) is True
    assert parked == [1] and m.acked and m.naks == []

    async def broken() -> None:
        raise ConnectionError("JetStream down")

    m = Msg()
    assert await dead_letter_then_ack(m, broken, 2.0) is False
    assert not m.acked and m.naks == [2.0]  # redelivered, never lost


async def test_confirm_subscriptions_only_warns(caplog: pytest.LogCaptureFixture) -> None:
    flushed = []

    class Conn:
        def __init__(self, ok: bool) -> None:
            self.ok = ok

        async def flush(self, timeout: float) -> None:
            if not self.ok:
                raise TimeoutError
            flushed.append(timeout)

    with caplog.at_level(logging.WARNING, "totalrecall.worker"):
        await confirm_subscriptions(Conn(False), Conn(True), timeout=3)
    assert flushed == [3] and "could not confirm" in caplog.text


async def test_concurrent_responder_bounds_and_drains() -> None:
    running = peak = 0
    release = asyncio.Event()

    async def answer(body: bytes) -> bytes:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1
        return body.upper()

    class Conn:
        cb: Any = None

        async def subscribe(self, subject: str, cb: Any) -> Any:
            self.cb = cb
            return self

        async def unsubscribe(self) -> None:
            self.cb = None

    conn = Conn()
    responder = ConcurrentResponder("q", answer, concurrency=2)
    await responder.start(conn)
    msgs = [Msg(b"x%d" % i, reply="inbox") for i in range(5)] + [Msg(b"noreply")]
    for m in msgs:
        await conn.cb(m)
    # Every request's task gets to run before this returns; more than 2 would be in by then.
    await wait_for(lambda: running >= 2, timeout=10, what="two answers running")
    assert peak == 2
    release.set()
    await responder.stop(timeout=5)
    assert conn.cb is None and peak == 2
    assert [m.responses for m in msgs[:5]] == [[b"X%d" % i] for i in range(5)]
    assert msgs[5].responses == []


async def test_raw_body_and_json_response() -> None:
    class FsMsg:
        body = b'{"not": "decoded"}'

    assert await raw_body(FsMsg()) == b'{"not": "decoded"}'
    resp = json_response({"path": Path("/x"), "n": 1}, 503)
    assert resp.status_code == 503 and json.loads(resp.body) == {"path": "/x", "n": 1}
