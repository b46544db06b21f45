"""The pull consumer's batching and error handling, on a fake subscription (no network)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from totalrecall_worker import PullConsumer, PullSpec
from totalrecall_worker import pull as pull_module
from waiting import wait_for


class Msg:
    def __init__(self, n: int) -> None:
        self.n = n
        self._ackd = False
        self.naks: list[float | None] = []

    async def ack(self) -> None:
        self._ackd = True

    async def nak(self, delay: float | None = None) -> None:
        self._ackd = True
        self.naks.append(delay)


class FakeSub:
    """Answers fetches from a script: a list of messages, or an exception to raise."""

    def __init__(self, *script: list[Msg] | BaseException) -> None:
        self.script = list(script)
        self.fetches: list[tuple[int, float]] = []
        self.unsubscribed = False

    async def fetch(self, batch: int, timeout: float) -> list[Msg]:
        self.fetches.append((batch, timeout))
        if not self.script:
            await asyncio.sleep(timeout)  # the fake of the server's long poll: nothing came
            raise TimeoutError
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    async def unsubscribe(self) -> None:
        self.unsubscribed = True


def consumer(sub: FakeSub | None = None, handle: Any = None, **spec: Any) -> PullConsumer:
    defaults: dict[str, Any] = {"stream": "S", "subject": "s.>", "durable": "d",
                                "ack_wait_s": 30.0, "max_ack_pending": 100}
    c = PullConsumer(lambda: None, PullSpec(**{**defaults, **spec}), handle or _ack_all)
    if sub is not None:
        async def subscribe() -> FakeSub:
            return sub
        c._subscribe = subscribe  # type: ignore[method-assign]
    return c


async def _ack_all(msgs: list[Msg]) -> None:
    for m in msgs:
        await m.ack()


async def test_an_idle_fetch_is_an_empty_batch() -> None:
    sub = FakeSub(TimeoutError())
    assert await consumer().fetch(sub) == []


async def test_a_busy_pipeline_tops_its_batch_up_within_the_deadline() -> None:
    first, rest = [Msg(1), Msg(2)], [Msg(3), Msg(4), Msg(5)]
    sub = FakeSub(first, rest)
    got = await consumer(batch_max=10, batch_deadline_s=0.05).fetch(sub)
    assert [m.n for m in got] == [1, 2, 3, 4, 5]
    assert sub.fetches == [(10, 1.0), (8, 0.05)]


async def test_a_top_up_that_times_out_keeps_what_was_fetched() -> None:
    # FastStream 0.7.8 dropped the partial batch here (a bare asyncio.TimeoutError mid-fetch).
    sub = FakeSub([Msg(1), Msg(2)], TimeoutError())
    got = await consumer(batch_max=10, batch_deadline_s=0.05).fetch(sub)
    assert [m.n for m in got] == [1, 2]


async def test_a_lone_message_or_a_full_batch_is_handled_at_once() -> None:
    sub = FakeSub([Msg(1)], [Msg(i) for i in range(4)])
    c = consumer(batch_max=4, batch_deadline_s=0.05)
    assert len(await c.fetch(sub)) == 1
    assert len(await c.fetch(sub)) == 4
    assert len(sub.fetches) == 2  # no top-up either time


async def test_batch_max_may_change_between_fetches() -> None:
    size = [3]
    sub = FakeSub([Msg(1)], [Msg(2)])
    c = consumer(batch_max=lambda: size[0])
    await c.fetch(sub)
    size[0] = 7
    await c.fetch(sub)
    assert [b for b, _ in sub.fetches] == [3, 7]


async def test_connection_trouble_is_an_empty_batch_after_a_pause(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []

    async def sleep(s: float) -> None:
        pauses.append(s)

    monkeypatch.setattr(pull_module.asyncio, "sleep", sleep)
    assert await consumer().fetch(FakeSub(ConnectionError("gone"))) == []
    assert pauses == [1.0]


async def test_a_failing_handler_naks_what_it_left_unsettled() -> None:
    done, left = Msg(1), Msg(2)

    async def handle(msgs: list[Msg]) -> None:
        await done.ack()
        raise RuntimeError("boom")

    c = consumer(FakeSub([done, left]), handle, nak_delay_on_error_s=2.5, fetch_timeout_s=0.05)
    await c.start()
    await wait_for(lambda: left.naks, timeout=10, what="the unsettled message nak'ed")
    await c.stop()
    assert done.naks == [] and left.naks == [2.5]


async def test_without_a_nak_delay_a_failure_leaves_messages_to_ack_wait() -> None:
    m = Msg(1)

    async def handle(msgs: list[Msg]) -> None:
        raise RuntimeError("boom")

    sub = FakeSub([m], [Msg(2)])
    c = consumer(sub, handle, fetch_timeout_s=0.05)
    await c.start()
    await wait_for(lambda: len(sub.fetches) >= 2, timeout=10, what="a fetch after the failure")
    assert c.alive  # the loop survived the failure
    await c.stop()
    assert m.naks == [] and not m._ackd


async def test_stop_finishes_the_batch_in_hand_then_unsubscribes() -> None:
    started, release, handled = asyncio.Event(), asyncio.Event(), []

    async def handle(msgs: list[Msg]) -> None:
        started.set()
        await release.wait()
        handled.extend(msgs)

    sub = FakeSub([Msg(1)])
    c = consumer(sub, handle, fetch_timeout_s=0.05)
    await c.start()
    await started.wait()
    stopping = asyncio.create_task(c.stop())
    await wait_for(lambda: not c.alive, timeout=10, what="stop() to take the reading task")
    await asyncio.wait({stopping}, timeout=0.05)  # a stop that did not wait would end here
    assert not stopping.done() and handled == [] and not sub.unsubscribed
    release.set()
    await stopping
    assert [m.n for m in handled] == [1] and sub.unsubscribed and not c.alive


def test_the_consumer_config() -> None:
    cfg = PullSpec(stream="S", subject="s.>", durable="d", ack_wait_s=60, max_ack_pending=10,
                   max_deliver=5).consumer_config()
    assert (cfg.durable_name, cfg.filter_subject, cfg.ack_wait, cfg.max_deliver,
            cfg.max_ack_pending) == ("d", "s.>", 60, 5, 10)
    assert cfg.ack_policy is not None and cfg.ack_policy.value == "explicit"
    assert cfg.deliver_policy is not None and cfg.deliver_policy.value == "all"


def test_a_consumer_of_several_subjects_filters_on_all() -> None:
    spec = PullSpec(stream="S", subject="s.events.>", durable="d", ack_wait_s=60,
                    max_ack_pending=10, more_subjects=("s.host.*.events.>",))
    cfg = spec.consumer_config()
    assert cfg.filter_subject is None
    assert cfg.filter_subjects == ["s.events.>", "s.host.*.events.>"] == spec.filters
