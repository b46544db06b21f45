"""The query embeddings of recent questions, kept in the recall API.

An agent asks the same things again (its recurring prompts, a retried question, several agents
on one machine), and a question's embedding depends only on its text and the embedder's model.
The embedder caches what it computed too, but asking it still costs a round trip through NATS
and three processes' time per recall; under load that trip waits in every run queue on the way.
So a question asked within `max_age_s` is not sent again: its vector, with the model that made
it, is reused. Concurrent recalls of one new question share one request.

A vector older than `max_age_s` is asked for again, so a change of the embedder's model shows
within that time (until then the indexer refuses the old model's vectors with "model mismatch"
and recall goes on by keyword: `RecallService._guard`). `forget_model` drops every vector of a
model whose search the indexer refused.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

Embedding = tuple[list[float], str | None]


class QueryVectors:
    def __init__(self, max_entries: int, max_age_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries, self.max_age_s, self.clock = max_entries, max_age_s, clock
        self._kept: OrderedDict[str, tuple[float, Embedding]] = OrderedDict()
        self._asked: dict[str, asyncio.Future[Embedding]] = {}

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0 and self.max_age_s > 0

    async def get(self, text: str, embed: Callable[[], Awaitable[Embedding]]) -> Embedding:
        """The vector of `text`: kept, being asked for by another recall, or from `embed()`.
        A failure is not kept (the next recall asks again)."""
        if not self.enabled:
            return await embed()
        kept = self._kept.get(text)
        if kept is not None:
            at, found = kept
            if self.clock() - at < self.max_age_s:
                self._kept.move_to_end(text)
                return found
            del self._kept[text]
        pending = self._asked.get(text)
        if pending is not None:
            # shield: a cancelled recall must not cancel the request the others wait on
            return await asyncio.shield(pending)
        future: asyncio.Future[Embedding] = asyncio.get_running_loop().create_future()
        self._asked[text] = future
        try:
            found = await embed()
        except BaseException as exc:
            # The recalls waiting on it degrade (`RecallService._guard`); a cancellation of
            # the one that asked is not theirs.
            future.set_exception(exc if isinstance(exc, Exception) else
                                 RuntimeError("the recall that asked for it was cancelled"))
            future.exception()  # retrieved: no "never retrieved" warning when nobody waited
            raise
        finally:
            del self._asked[text]
        future.set_result(found)
        self._kept[text] = (self.clock(), found)
        if len(self._kept) > self.max_entries:
            self._kept.popitem(last=False)
        return found

    def forget_model(self, model: str | None) -> None:
        """Drop every vector made by `model` (the indexer no longer takes its vectors)."""
        for text in [t for t, (_, (_, m)) in self._kept.items() if m == model]:
            del self._kept[text]

    def __len__(self) -> int:
        return len(self._kept)
