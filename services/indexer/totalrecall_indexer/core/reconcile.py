"""Zvec checked against Postgres: the self-healing of the vector tiers.

Postgres and the Markdown daily logs are the ground truth; Zvec is derived from them. Whatever
left Zvec short (a tier refilled when the stack stopped, a write lost to an OS crash, a kill
between compaction's two steps), this finds it: at start and every `reconcile_interval_s`, the
documents of each tier are counted in Zvec and in Postgres (the memories embedded with the
index's model, by their `tier`); only where the counts differ are keys compared.

A batch Postgres took and Zvec refused (a full disk) is not acked: it is in flight, and its
redelivery completes it. So the check runs only when nothing is in flight (`in_flight`: the
indexer consumer's unacked messages, asked under the write lock, so no batch is half-written
either); until then it is skipped and tried again. Then

- a memory Postgres has and no tier holds is re-embedded and re-indexed (its tier is listed for
  `TierReindex`, which refills only what is missing);
- a memory held by two tiers (compaction writes the colder tier first, then deletes) keeps the
  copy in the tier Postgres names, else the colder one, and loses the other;
- a key Zvec holds and Postgres does not (forgotten or expired in Postgres after the Zvec
  write, a batch dead-lettered after Zvec took it) is removed;
- Postgres's `tier` column is set to where the only copy is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .gate import CollectionGate
from .search import TIERS
from .state import IndexState
from .store_types import TierUnavailable

log = logging.getLogger("totalrecall.indexer")

InFlight = Callable[[], Awaitable[int]]


async def _nothing_in_flight() -> int:
    return 0


@dataclass
class Repair:
    """What makes Zvec agree with Postgres (`plan`)."""

    #: Postgres tier -> keys no Zvec tier holds (re-embedded).
    missing: dict[str, list[str]] = field(default_factory=dict)
    #: Zvec tier -> keys to delete there, and why ("duplicate" or "stray").
    remove: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Zvec tier -> keys whose only copy is there while Postgres names another tier.
    retier: dict[str, list[str]] = field(default_factory=dict)


def plan(zvec_keys: Mapping[str, Iterable[str]], postgres: Mapping[str, tuple[str, bool]]
         ) -> Repair:
    """Compare the keys each Zvec tier holds with Postgres's key -> (tier, whether Zvec should
    hold it: embedded with the index's model). A key Postgres holds without such a vector is
    left where it is (a memory of before the model was recorded, say): only keys Postgres does
    not hold at all are strays."""
    where: dict[str, list[str]] = {}
    for tier in TIERS:  # hot → cold: the last tier of a key is its coldest
        for key in zvec_keys.get(tier, ()):
            where.setdefault(key, []).append(tier)
    rep = Repair()
    for key, tiers in where.items():
        named, _ = postgres.get(key, (None, False))
        if named is None:
            for tier in tiers:
                rep.remove.setdefault(tier, {})[key] = "stray"
            continue
        keep = named if named in tiers else tiers[-1]
        for tier in tiers:
            if tier != keep:
                rep.remove.setdefault(tier, {})[key] = "duplicate"
        if keep != named:
            rep.retier.setdefault(keep, []).append(key)
    for key, (tier, vector) in postgres.items():
        if vector and key not in where:
            rep.missing.setdefault(tier, []).append(key)
    return rep


class Reconciler:
    def __init__(self, state: IndexState, gate: CollectionGate) -> None:
        self.state = state
        self.gate = gate
        #: Events delivered to the indexer and not acked yet, or waiting to be (the app sets
        #: it to the consumer's backlog; none without one).
        self.in_flight: InFlight = _nothing_in_flight
        #: The last check's result (`/health` `consistency`, `totalrecall doctor`).
        self.last: dict[str, Any] | None = None

    @property
    def done_once(self) -> bool:
        """Whether a check has run to its end since start (readiness waits for it)."""
        return self.last is not None and self.last.get("outcome") != "skipped"

    async def check(self) -> dict[str, Any]:
        """One check (and repair); its result, also kept in `last`. Counts, keys and the
        repair of Zvec are taken under one hold of the write lock, no build running: nothing
        is written meanwhile."""
        st, t0 = self.state, time.perf_counter()
        async with st.write_lock:
            why_not = await self._cannot_check()
            if why_not is None:
                async with self.gate.optimize_lock:
                    counts = await self._counts()
                    differ = [t for t, c in counts.items() if c["zvec"] != c["postgres"]]
                    if differ:
                        repaired = await self._plan_and_apply()
        if why_not is not None:
            result: dict[str, Any] = {"outcome": "skipped", "why": why_not}
        elif not differ:
            result = {"tiers": counts, "outcome": "consistent"}
        else:
            result = {"tiers": counts, **self._report(differ, *repaired)}
        result["checked_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        result["seconds"] = round(time.perf_counter() - t0, 3)
        self._observe(result)
        if result["outcome"] != "skipped" or self.last is None \
                or self.last.get("outcome") == "skipped":
            self.last = result
        return result

    async def _cannot_check(self) -> str | None:
        st = self.state
        if st.tiers.reindex or st.tiers.held:  # being repaired: checked once that is done
            return "tiers are being repaired: " + ", ".join(sorted({*st.tiers.reindex,
                                                                    *st.tiers.held}))
        if self.gate.resetting:
            return "the collections are being re-created"
        if self.gate.optimize_lock.locked():
            return "an HNSW build is running"
        try:
            n = await self.in_flight()
        except Exception as exc:  # NATS away: nothing can be said of what is in flight
            return f"the events in flight are unknown ({type(exc).__name__}: {exc})"
        if n:
            return f"{n} events are still in the pipeline"
        return None

    async def _counts(self) -> dict[str, dict[str, int]]:
        """(Under the write lock, no build running.) Per tier: documents in Zvec and in
        Postgres."""
        st = self.state
        pg = await st.pg.vector_counts(st.tiers.model)
        out = {}
        for tier in TIERS:
            if tier in st.tiers.cols:
                out[tier] = {"zvec": await asyncio.to_thread(st.tiers.count, tier),
                             "postgres": pg.get(tier, 0)}
        return out

    async def _plan_and_apply(self) -> tuple[Repair, dict[str, dict[str, int]], dict[str, str]]:
        """(Under the write lock, no build running.) Compare keys, remove what Zvec should not
        hold, correct the tier column."""
        st = self.state
        zkeys = {t: await asyncio.to_thread(st.tiers.keys, t) for t in st.tiers.cols}
        rep = plan(zkeys, await st.pg.key_tiers(st.tiers.model))
        removed, deferred = await self._apply(rep)
        return rep, removed, deferred

    def _report(self, differ: list[str], rep: Repair, removed: dict[str, dict[str, int]],
                deferred: dict[str, str]) -> dict[str, Any]:
        """List the tiers with missing memories for re-index, count, log; the outcome."""
        st = self.state
        for tier, keys in rep.missing.items():
            st.tiers.verify_later(tier, f"{len(keys)} of its memories in Postgres were missing "
                                        "from Zvec (consistency check)")
        if rep.missing:
            st.reindex_wanted.set()
        missing = {t: len(k) for t, k in rep.missing.items()}
        for tier, n in missing.items():
            st.metrics.reconcile_missing.labels(tier=tier).inc(n)
        for why, by_tier in removed.items():
            for tier, n in by_tier.items():
                st.metrics.reconcile_removed.labels(tier=tier, why=why).inc(n)
        log.warning("zvec differed from postgres in tiers %s: missing (re-indexed) %s, "
                    "removed %s%s", ", ".join(differ), missing or "none", removed,
                    f", left for the next check: {deferred}" if deferred else "")
        if not (missing or any(removed.values()) or rep.retier or deferred):
            # The counts differ by memories Postgres holds without this model's vector and Zvec
            # holds all the same: nothing to repair, and nothing to check again soon.
            return {"outcome": "consistent", "note": "the counts differ by memories Postgres "
                                                     "holds without a vector of the index's model"}
        return {"outcome": "repaired", "missing": missing, "removed": removed,
                "retiered": {t: len(k) for t, k in rep.retier.items()},
                **({"deferred": deferred} if deferred else {})}

    async def _apply(self, rep: Repair) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
        """(Under the write lock.) Deletes the duplicates and strays, corrects the tier column;
        a tier that takes no deletes now (disk full, writes held) is left for the next check."""
        st = self.state
        deferred: dict[str, str] = {}
        removed: dict[str, dict[str, int]] = {"duplicate": {}, "stray": {}}
        for tier, keys in rep.remove.items():
            try:
                await asyncio.to_thread(st.tiers.delete, tier, list(keys))
            except (OSError, TierUnavailable) as exc:
                deferred[tier] = str(exc)
                continue
            for why, n in Counter(keys.values()).items():
                removed[why][tier] = n
        for tier, only_here in rep.retier.items():
            await st.pg.set_tier(only_here, tier)
        return removed, deferred

    def _observe(self, result: dict[str, Any]) -> None:
        m = self.state.metrics
        m.reconcile_runs.labels(outcome=result["outcome"]).inc()
        if result["outcome"] == "skipped":
            return
        m.reconcile_last.set(time.time())
        for tier, c in result["tiers"].items():
            m.reconcile_difference.labels(tier=tier).set(c["zvec"] - c["postgres"])
