"""The recall pipeline: classify → (embed → vector search per tier) ‖ BM25 → fuse → MMR → block."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from typing import TYPE_CHECKING, TypeVar

from totalrecall_schema import (
    Degraded,
    Memory,
    OpenClawResult,
    RecallRequest,
    RecallResponse,
    VectorFilter,
    VectorHit,
    VectorSearchRequest,
    memory_key,
)
from totalrecall_schema.host import hostname_of

from .citations import Citations
from .core.answer_type import answer_type_first
from .core.categories import categories_of, category_list
from .core.classify import QueryClass, classify
from .core.conclusions import asked_first, derived_first
from .core.conclusions import profile as stated_profile
from .core.fusion import (
    Candidate,
    Weights,
    actor_boosts,
    boost_actors,
    by_score,
    evidence,
    fuse,
    mmr,
)
from .core.hosts import host_allowed, hosts_first, named_hosts, same_context
from .core.named import named_first, named_identifiers
from .core.neighbours import expand, in_session
from .core.render import relative_time, system_alerts_block, system_memory_block
from .core.repeats import order_repeats, slotted_templates, with_newest_repeats
from .core.supersede import (
    STATE_SUBCATEGORIES,
    asks_about_history,
    asks_about_now,
    demote_superseded,
    ends,
    supersede_ended,
    superseded,
)
from .core.temporal import boost_dated, date_refs, earliest_day
from .core.text import query_terms
from .core.timeframe import plan
from .metrics import Metrics
from .ports import Embedder, KnownHosts, Row, RowsBM25, Store, TemplateRows, VectorIndex
from .query_vectors import QueryVectors
from .settings import Settings

if TYPE_CHECKING:
    from .alerts import AlertMonitor

log = logging.getLogger("totalrecall.recall")
T = TypeVar("T")


async def _after(event: asyncio.Event | None, aw: Awaitable[T]) -> T:
    """`aw`, once `event` is set (at once without one)."""
    if event is not None:
        await event.wait()
    return await aw


def visible_until(req: RecallRequest) -> datetime | None:
    """The newest moment a question asked `asOf` may see: the end of the asking day.

    Same-day rule: the asking day's memories count, whatever their hour. LongMemEval (the
    benchmark that asks as of a date) stamps the turns of the asking day's sessions after the
    minute its question date names (6 of 48 dev questions; one gold turn): a strict cut would
    hide the conversation the question is about. Later days never show."""
    if req.as_of is None:
        return None
    return datetime.combine(req.as_of.date(), dtime.max, tzinfo=req.as_of.tzinfo or UTC)


def _after_asking(m: Memory | Row, req: RecallRequest) -> bool:
    """A memory from the future of the asking day (`asOf`): never shown."""
    until = visible_until(req)
    return until is not None and m.timestamp > until


def _ms(t: datetime | None) -> int | None:
    return int(t.timestamp() * 1000) if t is not None else None


async def _nothing() -> list[Row]:
    return []


SYSTEM_CATEGORIES = ("system.process", "system.service", "system.network", "system.storage",
                     "system.hardware", "system.pressure", "system.package", "system.config",
                     "error", "diagnosis", "system.container")


#: What the recall in progress had to do without (set by `RecallService.recall`; the tasks it
#: starts share the list).
_DEGRADED: contextvars.ContextVar[list[Degraded] | None] = contextvars.ContextVar(
    "degraded", default=None)


def _note_degraded(d: Degraded) -> None:
    found = _DEGRADED.get()
    if found is not None:
        found.append(d)


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
    _hosts: dict[str, tuple[float, list[str]]] = field(default_factory=dict)

    async def _timed(self, stage: str, aw: Awaitable[T]) -> T:
        t0 = time.perf_counter()
        try:
            return await aw
        finally:
            self.metrics.stage(stage, time.perf_counter() - t0)

    async def _vector(self, req: RecallRequest, since: datetime | None,
                      tiers: tuple[str, ...], escalation: tuple[str, ...],
                      embedded: asyncio.Event | None = None) -> list[VectorHit]:
        """`embedded`: a long query's keyword search waits on it (set once the embedding is
        back, or has failed); the embedding is then asked for as exclusive."""
        s = self.settings

        def ask() -> Awaitable[tuple[list[float], str | None]]:
            return self.embedder.embed_query(req.query, exclusive=embedded is not None)

        try:
            vector, model = await self._timed("embed", ask() if self.query_vectors is None
                                              else self.query_vectors.get(req.query, ask))
        finally:
            if embedded is not None:
                embedded.set()
        flt = VectorFilter(namespace=req.namespace,
                           since_ms=int(since.timestamp() * 1000) if since else None,
                           until_ms=_ms(visible_until(req)),
                           categories=category_list(req.category))

        async def search(tier_set: tuple[str, ...]) -> list[VectorHit]:
            try:
                reply = await self.index.search(VectorSearchRequest(
                    vector=vector, model=model, topk=s.vector_candidates, tiers=list(tier_set),
                    filter=flt))  # type: ignore[arg-type]
            except TimeoutError:
                raise  # a busy index says nothing about the vector
            except Exception:
                # Its model may be one the index no longer takes: asked for again next time.
                if self.query_vectors is not None:
                    self.query_vectors.forget_model(model)
                refused = getattr(self.embedder, "model_refused", None)
                if refused is not None:  # a local query model compares itself again
                    refused(model)
                raise
            for tier, ms in reply.took_ms.items():
                if tier in ("hot", "warm", "cold"):
                    self.metrics.stage(f"vector_{tier}", ms / 1000)
            if reply.missing_partitions:
                missing = reply.missing_partitions
                self.metrics.degraded.labels("vector partition").inc()
                _note_degraded(Degraded(
                    component="vector", partitions=missing,
                    reason=(f"no answer from the owner of index partition"
                            f"{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(map(str, missing))}: keywords only for "
                            f"{'them' if len(missing) > 1 else 'it'}")))
            return reply.hits

        hits = await search(tiers)
        good = sum(1 for h in hits if h.score >= s.good_match_similarity)
        if escalation and good < s.min_good_matches:
            hits += await search(escalation)
        return hits

    async def _bm25(self, req: RecallRequest,
                    since: datetime | None) -> list[tuple[str, float, Row | None]]:
        """Keyword hits, with their rows when the store can return them in the same query."""
        terms = query_terms(req.query)
        args = (terms, req.namespace, since, categories_of(req.category), self.settings.bm25_candidates)
        allowed = req.host_filter()
        hosts = sorted(allowed) if allowed else None
        if isinstance(self.store, RowsBM25):
            found = await self._timed("bm25", self.store.bm25_rows(*args, hosts=hosts)
                                      if hosts else self.store.bm25_rows(*args))
            return [(k, r, m) for k, r, m in found]
        # Only a filtered search names hosts (a store that knows none takes no such argument).
        plain = await self._timed("bm25", self.store.bm25(*args, hosts=hosts)
                                  if hosts else self.store.bm25(*args))
        return [(k, r, None) for k, r in plain]

    async def _guard(self, component: str, aw: Awaitable[list[T]]) -> list[T]:
        """A missing component degrades recall, it never fails it."""
        try:
            return await aw
        except Exception as exc:
            self.metrics.degraded.labels(component).inc()
            log.warning("recall without %s: %s", component, exc or type(exc).__name__)
            _note_degraded(Degraded(component=component,
                                    reason=(str(exc) or type(exc).__name__)[:300]))
            return []

    async def recall(self, req: RecallRequest, now: datetime | None = None) -> RecallResponse:
        """`now`: the clock (tests pin it); the question is asked at `req.as_of`, else now.
        The response lists what recall had to do without (`degraded`)."""
        found: list[Degraded] = []
        token = _DEGRADED.set(found)
        try:
            resp = await self._recall(req, now)
        finally:
            _DEGRADED.reset(token)
        once: dict[tuple[str, str], Degraded] = {}
        for d in found:  # one per component and reason (the namespaces searched each add one)
            once.setdefault((d.component, d.reason), d)
        resp.degraded = list(once.values())
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
            shown = {memory_key(m.namespace, m.id) for m in memories}
            profile = [p for p in profile if memory_key(p.namespace, p.id) not in shown]
            # Asked as of a moment: nothing from its future (see `_continuation`, `_hybrid`).
            memories = [m for m in memories if not _after_asking(m, req)]
            profile = [p for p in profile if not _after_asking(p, req)]
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
        if not isinstance(self.store, KnownHosts):
            return []
        ttl = self.settings.hosts_cache_s
        cached = self._hosts.get(namespace)
        if ttl > 0 and cached is not None and time.monotonic() - cached[0] < ttl:
            return cached[1]
        found = await self._timed("hosts", self.store.hosts(namespace))
        if ttl > 0:
            if len(self._hosts) >= 1024:  # bounded, as the profiles are
                self._hosts.clear()
            self._hosts[namespace] = (time.monotonic(), found)
        return found

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
        """`about_hosts`: the known hosts the question names (their memories first)."""
        s = self.settings
        # Limited to hosts: keyword search filters in Postgres; the vector index holds no host
        # (Zvec's collections keep the fields they were made with), so every other source's
        # rows are filtered here, and a vector hit only once its row is read.
        allowed = req.host_filter()
        dates = date_refs(req.query, now)
        p = plan(req.timeframe, now, clock=clock, named=earliest_day(dates) if dates else False,
                 policy=s.tier_policy)
        # A whole prompt: its embedding costs several times the keyword search, so the search
        # waits for it and the embedder may spread the embedding over both cores. A search
        # phrase: both at once, one core each.
        long = 0 < s.long_query_chars <= len(req.query)
        embedded = asyncio.Event() if long else None
        vec_hits, bm25_found, recent = await asyncio.gather(
            self._guard("vector", self._vector(req, p.since, p.first_tiers, p.escalation_tiers,
                                               embedded)),
            self._guard("bm25", _after(embedded, self._bm25(req, p.since))),
            self._guard("recent", _after(embedded, self._recent_system(req, now))
                        if diagnostic else _nothing()),
        )
        t_fuse = time.perf_counter()
        cands: dict[str, Candidate] = {}
        for h in vec_hits:
            c = cands.get(h.key)
            if c is None or (c.vector_sim or 0) < h.score:
                cands[h.key] = Candidate(h.key, datetime.fromtimestamp(h.timestamp_ms / 1000, UTC),
                                         h.summary, vector_sim=h.score, tier=h.tier,
                                         category=h.category)
        bm25_hits = [(k, rank) for k, rank, _ in bm25_found]
        rows = [(k, m) for k, _, m in bm25_found if m is not None]
        have = {k for k, _ in rows}
        missing = [k for k, _ in bm25_hits if k not in have]  # a store without bm25_rows
        if missing:
            rows += await self._guard("rows", self._timed("rows", self._rows(missing)))
        # Defence in depth: whatever an upstream returns, only this namespace's memories leave.
        by_key = {k: m for k, m in rows
                  if m.namespace == req.namespace and host_allowed(m.metadata, allowed)}
        for key, rank in bm25_hits:
            c = cands.get(key)
            if c is None:
                m = by_key.get(key)
                if m is None:
                    continue
                c = cands[key] = Candidate(key, m.timestamp, m.summary, tier=m.tier)
            c.bm25 = rank
        for m in recent:  # diagnostic: what just went wrong on the machine, even if worded apart
            if not host_allowed(m.metadata, allowed):
                continue
            key = memory_key(m.namespace, m.id)
            by_key.setdefault(key, m)
            cands.setdefault(key, Candidate(key, m.timestamp, m.summary, tier=m.tier))
        until = visible_until(req)
        if until is not None:  # BM25 and recent rows: nothing after the asking day
            cands = {k: c for k, c in cands.items() if c.timestamp <= until}
        self._describe(cands, by_key)
        weights = Weights(s.weight_vector, s.weight_bm25, s.weight_recency, s.half_life_hours,
                          s.vector_norm, s.bm25_min_coverage, s.vector_floor)
        ranked = fuse(list(cands.values()), now, weights)
        boost_dated(ranked, dates, s.date_boost)
        # "Why did my build fail" is about the machine's events, not the user's words.
        actors = actor_boosts(req.query, s.actor_boost, s.asker_actor,
                              0.0 if diagnostic else s.asker_boost)
        boost_actors(ranked, {k: m.actor for k, m in by_key.items()}, actors)
        if diagnostic:  # the design: diagnostic questions are about the machine's recent events
            for c in ranked:
                if c.category in SYSTEM_CATEGORIES:
                    c.components["diagnostic"] = s.diagnostic_boost
                    c.score += s.diagnostic_boost
        # Nothing about the query, only recent or said by the right person: not recalled (nor
        # lending to its neighbours). An unrelated question recalls nothing, not the latest.
        ranked = [c for c in ranked if evidence(c, weights) >= s.min_evidence]
        ranked.sort(key=by_score, reverse=True)
        self.metrics.stage("fusion", time.perf_counter() - t_fuse)
        # The vector hits' rows and the best hits' neighbours, in one trip's time: the
        # neighbours of a vector hit need only its key (the store finds its thread).
        unread = [h.key for h in vec_hits if h.key not in by_key]
        top = self._expansion_keys(ranked)
        vec_rows, found = await asyncio.gather(
            self._guard("rows", self._timed("rows", self._rows(unread))),
            self._guard("neighbours", self._neighbours(top, p.since, categories_of(req.category),
                                                       [*by_key, *unread])))
        fetched = {k: m for k, m in vec_rows
                   if m.namespace == req.namespace and host_allowed(m.metadata, allowed)}
        if until is not None:  # neighbours from after the asking day are no neighbours
            found = [(hit, [(k, m) for k, m in rows if m is None or not _after_asking(m, req)])
                     for hit, rows in found]
        if allowed is not None:  # a thread (a service's events) may span hosts
            found = [(hit, [(k, m) for k, m in rows
                            if m is None or host_allowed(m.metadata, allowed)])
                     for hit, rows in found]
        by_key.update(fetched)
        if allowed is not None:  # the vector hits of other hosts, known as such only now
            ranked = [c for c in ranked if c.key in by_key]
        self._describe(cands, fetched)
        if fetched:  # the actors of the vector hits are known only now
            boost_actors(ranked, {k: m.actor for k, m in fetched.items()}, actors)
            ranked.sort(key=by_score, reverse=True)
        # Answers by the actors the query names; the user's replies to the agent's questions
        # measured no better (LongMemEval turn MRR 0.708 -> 0.684).
        ranked = self._expand(ranked, by_key, found, frozenset(actors) - {s.asker_actor.lower()})
        if asks_about_now(req.query):
            ranked = await self._supersede(ranked, by_key, req.namespace)
        if not asks_about_history(req.query):  # a fact a newer one replaced is history
            ranked = demote_superseded(ranked, by_key, s.superseded_fact_factor)
        ranked = [c for c in ranked if c.score >= s.min_score]
        # A memory holding the kind of value the question asks for (a port, an address, a
        # function) before one that cannot answer it; an identifier the question names verbatim
        # ranks its memories before all; memories of one template tie but for noise: the one the
        # question names, else the newest.
        ranked = answer_type_first(
            ranked, req.query, lambda c: by_key[c.key].summary if c.key in by_key else c.text)
        # A question about what was concluded ("what was the fix for …", "what does the user
        # prefer for …"): those memories first (`core/conclusions.py`).
        ranked = named_first(asked_first(ranked, req.query), req.query)
        # A memory derived from a turn (what it concluded) just before that turn.
        ranked = self._derived_first(ranked, by_key)
        # A host the question names: its memories before the others' (`core/hosts.py`).
        ranked = hosts_first(ranked, about_hosts, lambda key: hostname_of(by_key[key].metadata)
                             if key in by_key else None)
        ranked = order_repeats(await self._newest_repeats(ranked, by_key, req, p.since, until, k,
                                                          allowed), req.query)
        t_mmr = time.perf_counter()
        # Diversity may have chosen a turn before its conclusion: the conclusion still leads.
        chosen = self._derived_first(mmr(ranked, k, s.mmr_lambda), by_key)
        self.metrics.stage("mmr", time.perf_counter() - t_mmr)
        out: list[Memory] = []
        for c in chosen:
            row = by_key.get(c.key)
            if row is None:
                continue  # indexed in Zvec but not yet visible in Postgres: skip, never guess
            m = row.memory()  # built for the chosen alone
            m.score = round(c.score, 6)
            if c.tier in ("hot", "warm", "cold"):
                m.tier = c.tier  # type: ignore[assignment]
            scores = {name: round(v, 4) for name, v in c.components.items()}
            m.metadata = {**m.metadata, "_scores": scores}
            out.append(m)
        return out

    @staticmethod
    def _derived_first(ranked: list[Candidate], by_key: dict[str, Row]) -> list[Candidate]:
        """The conclusions drawn from a turn (`core/conclusions.py`) rank just before the turn
        when it ranks above them: the conclusion answers, the turn is its context. A moved
        memory takes the turn's score (and a hair more), so later sorts keep the order."""
        turn_of: dict[str, str] = {}
        for c in ranked:
            m = by_key.get(c.key)
            if m is None:
                continue
            turn = m.metadata.get("derived_from")
            if isinstance(turn, str) and turn:
                turn_of[c.key] = memory_key(m.namespace, turn)
        if not turn_of:
            return ranked
        order = derived_first([c.key for c in ranked], turn_of)
        if order == [c.key for c in ranked]:
            return ranked
        by_cand = {c.key: c for c in ranked}
        out = [by_cand[k] for k in order]
        floor: dict[str, float] = {}  # a turn → the score its conclusions before it need
        for c in reversed(out):  # the conclusions moved stand right before their turn
            turn = turn_of.get(c.key)
            if turn is not None and turn in floor and c.score <= floor[turn]:
                lift = floor[turn] - c.score + 1e-6
                c.components["derived"] = round(lift, 6)
                c.score += lift
            if turn is not None and turn in floor:
                floor[turn] = c.score
            floor.setdefault(c.key, c.score)
        return out

    @staticmethod
    def _describe(cands: dict[str, Candidate], by_key: dict[str, Row]) -> None:
        """Text and category of the candidates whose rows are at hand (MMR compares texts)."""
        for key, c in cands.items():
            m = by_key.get(key)
            if m is not None:
                c.text = f"{m.summary} {m.detail}"
                c.category = m.category

    def _expansion_keys(self, ranked: list[Candidate]) -> list[str]:
        """The hits whose neighbours are looked up (none when expansion is off)."""
        s = self.settings
        if s.neighbour_weight <= 0 or s.neighbour_window <= 0 or s.neighbour_hits <= 0:
            return []
        return [c.key for c in ranked[: s.neighbour_hits]]

    def _expand(self, ranked: list[Candidate], by_key: dict[str, Row],
                found: list[tuple[str, list[tuple[str, Row | None]]]],
                answerers: frozenset[str]) -> list[Candidate]:
        """Neighbour expansion (before MMR, so a neighbour that repeats its hit is still dropped).
        `answerers`: the actors the query names, whose answers to a matching question count."""
        s = self.settings
        if not found:
            return ranked
        nbrs: dict[str, list[tuple[str, Row]]] = {}
        for hit, rows in found:
            if hit not in by_key:
                continue
            # Same namespace only, like every other row (defence in depth), and the hit's own
            # host for a machine's events (`core/hosts.py`). A row the store left out (None) is
            # one we hold already.
            have = [(k, m if m is not None else by_key.get(k)) for k, m in rows]
            this = by_key[hit]
            keep = [(k, m) for k, m in have
                    if m is not None and m.namespace == this.namespace
                    and same_context(this.metadata, m.metadata)]
            for k, m in keep:
                by_key.setdefault(k, m)
            nbrs[hit] = keep
        out = expand(ranked, nbrs, s.neighbour_weight, s.neighbour_decay, s.neighbour_answer_weight,
                     answerers, lambda key: key in by_key and in_session(by_key[key].metadata))
        # the neighbours that were no candidates
        self._describe({c.key: c for c in out if not c.category}, by_key)
        return out

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
        rows = await self._guard("process ends", self._timed("process ends", self.store.recent_rows(
            namespace, since, "system.process", 500)))
        return supersede_ended(ranked, by_key, ends(rows), factor)

    async def _neighbours(self, keys: list[str], since: datetime | None,
                          category: tuple[str, ...] | None,
                          known: Collection[str]
                          ) -> list[tuple[str, list[tuple[str, Row | None]]]]:
        s = self.settings
        found = await self._timed("neighbours", self.store.neighbours(
            keys, s.neighbour_window, s.neighbour_max_gap_s, since, category,
            s.neighbour_event_gap_s, known=list(known)))
        return list(found.items())

    async def _continuation(self, req: RecallRequest, k: int) -> list[Memory]:
        """"Where were we": the latest session, i.e. the newest conversation memory (before
        `asOf`; of the request's category when it names one) and what came before it in its
        thread (its conversation, see the store's `neighbours`), newest first. Memories of
        other sessions in between are left out."""
        allowed = req.host_filter()

        def visible(m: Memory) -> bool:
            return not _after_asking(m, req) and host_allowed(m.metadata, allowed)

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

    async def _recent_system(self, req: RecallRequest, now: datetime) -> list[Row]:
        cats = list(categories_of(req.category) or SYSTEM_CATEGORIES)
        rows = await self.store.recent_rows(req.namespace, now - timedelta(hours=24), None, 20, cats)
        return [m for m in rows if m.severity in ("warning", "error", "critical")][:10]

    async def _newest_repeats(self, ranked: list[Candidate], by_key: dict[str, Row],
                              req: RecallRequest, since: datetime | None,
                              until: datetime | None, k: int,
                              allowed: frozenset[str] | None = None) -> list[Candidate]:
        """`ranked` with the newest memories of its first templates that it lacks
        (`core/repeats.with_newest_repeats`), from a store that knows templates."""
        n = self.settings.repeats_newest
        templates = slotted_templates(ranked, k, named_identifiers(req.query)) if n > 0 else []
        if not templates or not isinstance(self.store, TemplateRows):
            return ranked
        rows = await self._guard("repeats", self._timed("repeats", self.store.newest_of_templates(
            req.namespace, templates, since, until, categories_of(req.category), n)))
        newest: list[Candidate] = []
        for m in rows:
            if m.namespace != req.namespace or not host_allowed(m.metadata, allowed):
                continue
            key = memory_key(m.namespace, m.id)
            by_key.setdefault(key, m)
            newest.append(Candidate(key, m.timestamp, m.summary, tier=m.tier,
                                    category=m.category))
        return with_newest_repeats(ranked, newest)

    async def _rows(self, keys: list[str]) -> list[tuple[str, Row]]:
        return list((await self.store.rows(list(dict.fromkeys(keys)))).items())

