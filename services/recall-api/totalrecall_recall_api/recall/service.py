"""The recall pipeline: classify, then per namespace a hybrid search in named stages
(plan → candidates → fuse → expand → supersede → MMR: `_hybrid`; the look-ups in
`adapters/candidates.py`, the rest pure in `core/`), and the block shown to the model."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from totalrecall_schema import (
    Memory,
    OpenClawResult,
    RecallRequest,
    RecallResponse,
    memory_key,
)
from totalrecall_schema.host import hostname_of

from ..adapters.candidates import SYSTEM_CATEGORIES, Sources
from ..adapters.citations import Citations
from ..core.answer_type import answer_type_first
from ..core.candidates import collect, describe, text_of
from ..core.categories import categories_of
from ..core.choose import choose
from ..core.classify import QueryClass, classify
from ..core.conclusions import profile as stated_profile
from ..core.derived import derived_before_turns, shown_as_turn
from ..core.expansion import expansion_keys, with_neighbours
from ..core.fusion import Candidate, boost_actors, by_score
from ..core.hosts import host_allowed, hosts_first, named_hosts
from ..core.incidents import incident_first
from ..core.intent import newest_state_first, routed_first
from ..core.named import named_first, named_identifiers
from ..core.rank import rank
from ..core.render import relative_time, system_alerts_block, system_memory_block
from ..core.repeats import order_repeats, slotted_templates, with_newest_repeats
from ..core.speakers import speaker_names, without_speakers
from ..core.supersede import (
    STATE_SUBCATEGORIES,
    asks_about_history,
    asks_about_now,
    demote_superseded,
    ends,
    supersede_ended,
    superseded,
)
from ..core.temporal import date_refs, earliest_day
from ..core.timeframe import after_asking, plan, visible_until
from ..metrics import Metrics
from ..ports import Embedder, KnownHosts, KnownSpeakers, Row, Store, VectorIndex
from ..settings import Settings
from .degraded import collecting
from .query_vectors import QueryVectors
from .refreshing import Refreshing

if TYPE_CHECKING:
    from ..alerts.monitor import AlertMonitor

__all__ = ["SYSTEM_CATEGORIES", "RecallService"]

log = logging.getLogger("totalrecall.recall")
T = TypeVar("T")


async def _after(event: asyncio.Event | None, aw: Awaitable[T]) -> T:
    """`aw`, once `event` is set (at once without one)."""
    if event is not None:
        await event.wait()
    return await aw


async def _nothing() -> list[Any]:
    """An empty answer, for a look-up that has nothing to look up."""
    return []


@dataclass
class RecallService:
    settings: Settings
    embedder: Embedder
    index: VectorIndex
    store: Store
    metrics: Metrics
    citations: Citations | None = None
    alerts: AlertMonitor | None = None
    #: Vectors of questions asked lately (None: every question goes to the embedder).
    query_vectors: QueryVectors | None = None
    _profiles: dict[str, tuple[float, list[Memory]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sources = Sources(self.metrics, self.settings, self.embedder, self.index, self.store,
                               self.query_vectors)
        self._timed, self._guard = self.sources.timed, self.sources.guard
        # Read before the search: once known, refreshed behind the recalls (`refreshing.py`).
        self._hosts: Refreshing[str, list[str]] = Refreshing(self.settings.hosts_cache_s)
        self._speakers: Refreshing[str, frozenset[str]] = Refreshing(
            self.settings.speakers_cache_s)

    async def recall(self, req: RecallRequest, now: datetime | None = None) -> RecallResponse:
        """`now`: the clock (tests pin it); the question is asked at `req.as_of`, else now.
        The response lists what recall had to do without (`degraded`)."""
        with collecting() as degraded:
            resp = await self._recall(req, now)
        resp.degraded = degraded
        return resp

    async def _recall(self, req: RecallRequest, now: datetime | None) -> RecallResponse:
        t0 = time.perf_counter()
        clock = now or datetime.now(UTC)
        now = req.as_of or clock
        cls = classify(req.query, req.max_results)
        memories: list[Memory] = []
        profile: list[Memory] = []
        known: list[str] = []
        if cls.max_results > 0:
            k = cls.max_results
            known = await self._guard("hosts", self._scope_hosts(req.scope()))
            # A question about one machine ("what failed on db-01?") ranks its memories first;
            # a request limited to hosts has only theirs anyway.
            about = frozenset() if req.host_filter() else named_hosts(req.query, known)
            if cls.kind is QueryClass.CONTINUATION:
                found = self._across(req, k, lambda r: self._continuation(r, k), latest=True)
            else:
                found = self._across(req, k, lambda r: self._hybrid(
                    r, k, now, clock, diagnostic=cls.kind is QueryClass.DIAGNOSTIC,
                    about_hosts=about))
            # The user's patterns do not depend on the search: fetched alongside it.
            memories, profile = await asyncio.gather(found, self._guard(
                "profile", self._scope_profile(req.scope())))
            shown = {memory_key(m.namespace, m.id): m for m in memories}
            # Each said once: a pattern shown among the memories, or stated by a turn shown whole.
            profile = [p for p in profile if memory_key(p.namespace, p.id) not in shown
                       and not (self.settings.restated_turns_once and shown_as_turn(p, shown))]
            # Asked as of a moment: nothing from its future (see `_continuation`, `_hybrid`).
            memories = [m for m in memories if not after_asking(m, req.as_of)]
            profile = [p for p in profile if not after_asking(p, req.as_of)]
        for m in memories:
            m.relative_time = relative_time(m.timestamp, now)
        # Lines name their host once the namespace knows more than one (on one machine the host
        # tells the model nothing).
        hosts = {*known, *(h for m in memories if (h := hostname_of(m.metadata)))}
        block = system_memory_block(memories, now, profile, show_hosts=len(hosts) > 1)
        # Open alerts go into every block, a greeting's too ("before we start…"); a question
        # asked as of another moment does not see today's.
        alerts = self.alerts.open_alerts(req.scope()) \
            if self.alerts is not None and req.as_of is None else []
        part = system_alerts_block(alerts, now, self.settings.alerts_in_block)
        block = "\n".join(b for b in (block, part) if b)
        took = time.perf_counter() - t0
        self.metrics.stage("total", took)
        self.metrics.results.observe(len(memories))
        results = self._openclaw(memories) if req.format == "openclaw" else None
        return RecallResponse(memories=memories, system_memory=block, took_ms=took * 1000,
                              query_class=cls.kind.value, results=results, alerts=alerts)

    async def _across(self, req: RecallRequest, k: int,
                      search: Callable[[RecallRequest], Awaitable[list[Memory]]], *,
                      latest: bool = False) -> list[Memory]:
        """`search` in each namespace the request reads (at once), fused into one list of `k`:
        by score, or (`latest`: a continuation) the namespace whose session is the newest.
        Ties go to the namespace named first (the agent's own)."""
        scope = req.scope()
        if len(scope) == 1:
            return await search(req.model_copy(update={"namespace": scope[0], "namespaces": None}))
        found = await asyncio.gather(*(
            search(req.model_copy(update={"namespace": ns, "namespaces": None})) for ns in scope))
        if latest:
            return max(found, key=lambda ms: ms[0].timestamp if ms else datetime.min.replace(
                tzinfo=UTC))
        fused = sorted((m for ms in found for m in ms), key=by_score, reverse=True)
        return fused[:k]

    async def _scope_profile(self, scope: list[str]) -> list[Memory]:
        """The user patterns of every namespace read, each once (the same text counts once)."""
        found = await asyncio.gather(*(self._profile(ns) for ns in scope))
        seen: set[str] = set()
        out: list[Memory] = []
        for m in (m for ms in found for m in ms):
            text = " ".join(m.summary.split()).lower()
            if text not in seen:
                seen.add(text)
                out.append(m)
        return out

    async def _scope_hosts(self, scope: list[str]) -> list[str]:
        """The hosts of every namespace read (each once)."""
        found = await asyncio.gather(*(self._known_hosts(ns) for ns in scope))
        return sorted({h for hs in found for h in hs})

    async def _known_hosts(self, namespace: str) -> list[str]:
        """The hosts a namespace's memories happened on, read at most every `hosts_cache_s`."""
        store = self.store
        if not isinstance(store, KnownHosts):
            return []
        return await self._hosts.get(
            namespace, lambda: self._timed("hosts", store.hosts(namespace)))

    async def _known_speakers(self, namespace: str) -> frozenset[str]:
        """The names of who speaks in a namespace's conversations (not the generic actors),
        read at most every `speakers_cache_s`. None known (a store without them, or one that
        failed to say): the question is embedded as asked."""
        store = self.store
        if not isinstance(store, KnownSpeakers):
            return frozenset()

        async def read() -> frozenset[str]:
            return speaker_names(await self._timed("speakers", store.speakers(namespace)))
        try:
            return await self._speakers.get(namespace, read)
        except Exception as exc:  # the first read failed (a timeout): asked again next time
            log.debug("speakers of %s not read: %s", namespace, exc)
            return frozenset()

    def forgotten(self, namespace: str) -> None:
        """Memories of `namespace` were forgotten: its cached profile may hold one."""
        self._profiles.pop(namespace, None)

    async def _profile(self, namespace: str) -> list[Memory]:
        """The namespace's user patterns, read at most every `profile_cache_s` seconds."""
        ttl = self.settings.profile_cache_s
        cached = self._profiles.get(namespace)
        if ttl > 0 and cached is not None and time.monotonic() - cached[0] < ttl:
            return list(cached[1])
        # Superseded patterns (an old preference, a schedule learned again) are left out; of
        # the preferences and corrections stated in conversation, the newest few.
        s = self.settings
        n = s.profile_max_patterns
        rows = await self.store.recent(namespace, None, "user_pattern", max(4 * n, 64))
        found = stated_profile([m for m in rows if not superseded(m)], n, s.profile_max_stated)
        if ttl > 0:
            if len(self._profiles) >= 1024:  # bounded: namespaces are few, but never grow unbounded
                self._profiles.clear()
            self._profiles[namespace] = (time.monotonic(), found)
        return list(found)

    def _openclaw(self, memories: list[Memory]) -> list[OpenClawResult]:
        cite = self.citations or Citations(self.settings.memory_dir)
        out: list[OpenClawResult] = []
        for m in memories:
            path, start, end = cite.locate(m.namespace, m.id, f"{m.timestamp:%Y-%m-%d}")
            snippet = m.summary + (f"\n{m.detail}" if m.detail else "")
            anchor = f"#L{start}-L{end}" if start else ""
            out.append(OpenClawResult(id=m.id, path=path, startLine=start, endLine=end,
                                      snippet=snippet[:700], score=m.score,
                                      citation=f"{path}{anchor}"))
        return out

    async def _hybrid(self, req: RecallRequest, k: int, now: datetime, clock: datetime, *,
                      diagnostic: bool = False,
                      about_hosts: frozenset[str] = frozenset()) -> list[Memory]:
        """plan → candidates → fuse → expand → supersede → MMR. `about_hosts`: the known hosts
        the question names (their memories first)."""
        s, src = self.settings, self.sources
        # plan. Limited to hosts: keyword search filters in Postgres; the vector index holds no
        # host (Zvec's collections keep the fields they were made with), so every other
        # source's rows are filtered here, and a vector hit only once its row is read.
        allowed = req.host_filter()
        until = visible_until(req.as_of)
        dates = date_refs(req.query, now)
        p = plan(req.timeframe, now, clock=clock, named=earliest_day(dates) if dates else False,
                 policy=s.tier_policy)
        cats = categories_of(req.category)

        def mine(m: Row) -> bool:  # defence in depth: whatever an upstream returns
            return m.namespace == req.namespace and host_allowed(m.metadata, allowed)

        # candidates. A whole prompt: its embedding costs several times the keyword search, so
        # the search waits for it and the embedding may spread over both cores. A search
        # phrase: both at once, one core each.
        long = 0 < s.long_query_chars <= len(req.query)
        embedded = asyncio.Event() if long else None
        # The vector search is asked what; who (a speaker the question names) is the actor
        # field's to match (`core/speakers.py`). The keyword search sees the whole question.
        asked = without_speakers(req.query, await self._known_speakers(req.namespace)) \
            if s.embed_without_speakers else req.query
        vec_hits, bm25_found, recent = await asyncio.gather(
            src.guard("vector", src.vector(req, p.since, p.first_tiers, p.escalation_tiers,
                                           embedded, asked=asked)),
            src.guard("bm25", _after(embedded, src.bm25(req, p.since))),
            src.guard("recent", _after(embedded, src.recent_system(req, now))
                      if diagnostic else _nothing()),
        )
        t_fuse = time.perf_counter()
        bm25_hits = [(key, r) for key, r, _ in bm25_found]
        rows = [(key, m) for key, _, m in bm25_found if m is not None]
        have = {key for key, _ in rows}
        missing = [key for key, _ in bm25_hits if key not in have]  # a store without bm25_rows
        if missing:
            rows += await src.guard("rows", src.rows(missing))
        by_key = {key: m for key, m in rows if mine(m)}
        cands = collect(vec_hits, bm25_hits, by_key, recent, allowed, until)
        # fuse
        ranked, actors = rank(list(cands.values()), by_key, now, req.query, dates, s,
                              diagnostic=diagnostic, system_categories=SYSTEM_CATEGORIES)
        self.metrics.stage("fusion", time.perf_counter() - t_fuse)
        # expand. The vector hits' rows and the best hits' neighbours, in one trip's time: the
        # neighbours of a vector hit need only its key (the store finds its thread).
        unread = [h.key for h in vec_hits if h.key not in by_key]
        top = expansion_keys(ranked, s)
        vec_rows, found = await asyncio.gather(
            src.guard("rows", src.rows(unread)) if unread else _nothing(),
            src.guard("neighbours", src.neighbours(top, p.since, cats, [*by_key, *unread]))
            if top else _nothing())
        fetched = {key: m for key, m in vec_rows if mine(m)}
        # Neighbours from after the asking day are no neighbours; a thread (a service's events)
        # may span hosts.
        found = [(hit, [(key, m) for key, m in nrows if m is None or (
            not after_asking(m, req.as_of) and host_allowed(m.metadata, allowed))])
            for hit, nrows in found]
        by_key.update(fetched)
        if allowed is not None:  # the vector hits of other hosts, known as such only now
            ranked = [c for c in ranked if c.key in by_key]
        describe(cands, fetched)
        if fetched:  # the actors of the vector hits are known only now
            boost_actors(ranked, {key: m.actor for key, m in fetched.items()}, actors)
            ranked.sort(key=by_score, reverse=True)
        # Answers by the actors the query names; the user's replies to the agent's questions
        # measured no better (LongMemEval turn MRR 0.708 -> 0.684).
        ranked = with_neighbours(ranked, by_key, found,
                                 frozenset(actors) - {s.asker_actor.lower()}, s)
        # supersede
        if asks_about_now(req.query):
            ranked = await self._supersede(ranked, by_key, req.namespace)
        if not asks_about_history(req.query):  # a fact a newer one replaced is history
            ranked = demote_superseded(ranked, by_key, s.superseded_fact_factor)
        ranked = [c for c in ranked if c.score >= s.min_score]
        ranked = self._answers_first(ranked, by_key, req.query, about_hosts,
                                     s.neighbour_event_gap_s, s.conclusions_by_topic)
        ranked = order_repeats(await self._newest_repeats(ranked, by_key, req, p.since, until, k,
                                                          allowed), req.query)
        # MMR
        t_mmr = time.perf_counter()
        out = choose(ranked, by_key, k, s.mmr_lambda, s.restated_turns_once)
        self.metrics.stage("mmr", time.perf_counter() - t_mmr)
        return out

    @staticmethod
    def _answers_first(ranked: list[Candidate], by_key: dict[str, Row], query: str,
                       about_hosts: frozenset[str], incident_gap_s: float,
                       conclusions_by_topic: bool) -> list[Candidate]:
        """A memory holding the kind of value the question asks for (a port, an address, a
        function) before one that cannot answer it; an identifier the question names verbatim
        ranks its memories before all; memories of one template tie but for noise: the one the
        question names, else the newest."""
        ranked = answer_type_first(
            ranked, query, lambda c: by_key[c.key].summary if c.key in by_key else c.text)
        # What the question asks about, in the words people use ("what ate my RAM", "who
        # touched …", "did the backup container die", "what was the fix for …"): the memories
        # of that kind first, and those naming the thing it names (`core/intent.py`).
        ranked = named_first(routed_first(ranked, query, by_key.get, conclusions_by_topic),
                             query)
        # A memory derived from a turn (what it concluded) just before that turn.
        ranked = derived_before_turns(ranked, by_key)
        # A host the question names: its memories before the others' (`core/hosts.py`).
        ranked = hosts_first(ranked, about_hosts, lambda key: hostname_of(by_key[key].metadata)
                             if key in by_key else None)
        # One unit's or container's events that came together: for "why…" its first failure
        # (the cause), else its last event (the outcome) first (`core/incidents.py`).
        ranked = incident_first(ranked, query, by_key.get, incident_gap_s)
        # "Is nginx up now?": of each container's, unit's or pressure's states, the newest first.
        return newest_state_first(ranked, query, by_key.get)

    async def _supersede(self, ranked: list[Candidate], by_key: dict[str, Row],
                         namespace: str) -> list[Candidate]:
        """A question about now: the state events of processes that have ended since count less
        (one look-up of the process events since the oldest such candidate)."""
        factor = self.settings.superseded_factor
        states = [by_key[c.key] for c in ranked
                  if c.key in by_key and by_key[c.key].subcategory in STATE_SUBCATEGORIES]
        if factor >= 1 or not states:
            return ranked
        since = min(m.timestamp for m in states)
        rows = await self._guard("process ends", self.sources.process_ends(namespace, since))
        return supersede_ended(ranked, by_key, ends(rows), factor)

    async def _newest_repeats(self, ranked: list[Candidate], by_key: dict[str, Row],
                              req: RecallRequest, since: datetime | None,
                              until: datetime | None, k: int,
                              allowed: frozenset[str] | None = None) -> list[Candidate]:
        """`ranked` with the newest memories of its first templates that it lacks
        (`core/repeats.with_newest_repeats`), from a store that knows templates."""
        n = self.settings.repeats_newest
        templates: list[str] = []
        if n > 0:  # looked up by the template the store keeps: of the summary alone
            summaries = {c.key: by_key[c.key].summary for c in ranked[:k] if c.key in by_key}
            templates = slotted_templates(ranked, k, named_identifiers(req.query), summaries)
        rows = await self._guard("repeats", self.sources.newest_of_templates(
            req, templates, since, until, n))
        if not rows:
            return ranked
        newest: list[Candidate] = []
        for m in rows:
            if m.namespace != req.namespace or not host_allowed(m.metadata, allowed):
                continue
            key = memory_key(m.namespace, m.id)
            by_key.setdefault(key, m)
            # Described as the ranked candidates are, so their templates compare.
            newest.append(Candidate(key, m.timestamp, text_of(m), tier=m.tier,
                                    category=m.category))
        return with_newest_repeats(ranked, newest)

    async def _continuation(self, req: RecallRequest, k: int) -> list[Memory]:
        """"Where were we": the latest session, i.e. the newest conversation memory (before
        `asOf`; of the request's category when it names one) and what came before it in its
        thread (its conversation, see the store's `neighbours`), newest first. Memories of
        other sessions in between are left out."""
        allowed = req.host_filter()

        def visible(m: Memory) -> bool:
            return not after_asking(m, req.as_of) and host_allowed(m.metadata, allowed)

        # A session is a conversation's: the newest conversation memory, unless asked otherwise.
        cats = categories_of(req.category)
        latest = [m for m in await self.store.recent(req.namespace, None,
                                                     None if cats else "conversation", k * 4, cats)
                  if visible(m)]
        if not latest and req.category is None:  # no conversation at all: the latest memories
            return [m for m in await self.store.recent(req.namespace, None, None, k * 4)
                    if visible(m)][:k]
        if not latest:
            return []
        head = latest[0]
        key = memory_key(head.namespace, head.id)
        thread = await self._guard("neighbours", self._thread(key, k, cats))
        rows = [m for m in thread if m is not None and m.timestamp <= head.timestamp
                and m.namespace == head.namespace and visible(m)]
        # A session of one memory is still the latest session (its thread holds nothing else).
        return sorted([head, *rows], key=lambda m: m.timestamp, reverse=True)[:k]

    async def _thread(self, key: str, k: int, category: tuple[str, ...] | None) -> list[Memory]:
        gap = self.settings.continuation_gap_s
        found = await self.store.neighbours([key], k, gap, None, category, event_gap_s=gap)
        return [m.memory() for _, m in found.get(key, []) if m is not None]
