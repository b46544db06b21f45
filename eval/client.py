"""A small synchronous client for the recall API, plus the "wait until searchable" logic."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

import httpx

from .datasets import Turn

try:  # the storage key, so results that carry the key instead of the id still map back
    from totalrecall_schema import memory_key as _memory_key
except Exception:  # pragma: no cover - schema not installed
    _memory_key = None


class ApiError(RuntimeError):
    pass


class RecallClient:
    def __init__(self, base_url: str, timeout: float = 120.0, token: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base, timeout=timeout, headers=headers)

    def close(self) -> None:
        self.http.close()

    def _request(self, method: str, path: str, *, json: Any = None, retries: int = 5,
                 params: Mapping[str, str] | None = None) -> Any:
        delay = 0.5
        for attempt in range(retries + 1):
            try:
                r = self.http.request(method, path, json=json, params=params)
            except httpx.TransportError as exc:
                if attempt == retries:
                    raise ApiError(f"{method} {path}: {exc}") from exc
            else:
                if r.status_code < 500 and r.status_code != 429:
                    if r.is_error:
                        raise ApiError(f"{method} {path}: {r.status_code} {r.text[:500]}")
                    return r.json() if r.content else None
                if attempt == retries:
                    raise ApiError(f"{method} {path}: {r.status_code} {r.text[:500]}")
            time.sleep(delay)
            delay = min(delay * 2, 8.0)
        raise AssertionError("unreachable")

    def health(self) -> dict[str, Any]:
        return dict(self._request("GET", "/memory/health", retries=0) or {})

    def ingest(self, events: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return dict(self._request("POST", "/memory/ingest", json=list(events)) or {})

    def recall(self, query: str, namespace: str, max_results: int = 10,
               timeframe: str = "all", as_of: datetime | None = None,
               ) -> tuple[list[dict[str, Any]], float, dict[str, Any]]:
        """→ (memories, client-side latency in ms, the whole response). `as_of`: when the
        question is asked (the dataset's question date), sent as `asOf` when given."""
        t0 = time.perf_counter()
        req: dict[str, Any] = {"query": query, "namespace": namespace, "timeframe": timeframe,
                               "maxResults": max_results}
        if as_of is not None:
            req["asOf"] = as_of.isoformat()
        body = self._request("POST", "/memory/recall", json=req)
        ms = (time.perf_counter() - t0) * 1000
        return list(body.get("memories", [])), ms, body

    def stats(self, namespace: str | None = None) -> Any:
        params = {"namespace": namespace} if namespace else None
        try:
            return self._request("GET", "/memory/stats", params=params, retries=1)
        except ApiError:
            return None


# ------------------------------------------------------------------------------------------------
# Mapping results back to turn ids

class Identified(Protocol):
    """What a memory we ingested is known by: a turn, or a LogQA log line."""

    @property
    def id(self) -> str: ...
    @property
    def session(self) -> str: ...
    @property
    def index(self) -> int: ...


def make_id_resolver(namespace: str,
                     turns: Sequence[Identified]) -> Callable[[Mapping[str, Any]], str | None]:
    """A function memory-dict → turn id. Accepts the event id we sent, the storage key
    (`memory_key(namespace, id)`), metadata {session, turn}, or `derived_from` (a memory the
    recall API derived from a turn)."""
    ids = {t.id for t in turns}
    by_key = {_memory_key(namespace, t.id): t.id for t in turns} if _memory_key else {}
    by_meta = {(t.session, t.index): t.id for t in turns}

    def resolve(mem: Mapping[str, Any]) -> str | None:
        for field in ("id", "event_id", "key"):
            v = mem.get(field)
            if isinstance(v, str):
                if v in ids:
                    return v
                if v in by_key:
                    return by_key[v]
        meta = mem.get("metadata") or {}
        # What a turn concluded (a diagnosis, a preference: the recall API's derived memories)
        # is a sentence of that turn: finding it finds the turn.
        source = meta.get("derived_from") if isinstance(meta, Mapping) else None
        if isinstance(source, str) and source in ids:
            return source
        if isinstance(meta, Mapping) and "session" in meta and "turn" in meta:
            try:
                return by_meta.get((str(meta["session"]), int(meta["turn"])))
            except (TypeError, ValueError):
                return None
        return None

    return resolve


def ranked_ids(memories: Sequence[Mapping[str, Any]],
               resolve: Callable[[Mapping[str, Any]], str | None]) -> list[str]:
    out: list[str] = []
    for m in memories:
        tid = resolve(m)
        if tid is not None and tid not in out:
            out.append(tid)
    return out


# ------------------------------------------------------------------------------------------------
# Waiting until a namespace is searchable

_COUNT_KEYS = ("count", "total", "memories", "n", "documents", "docs", "rows")


def namespace_count(stats: Any, namespace: str) -> int | None:
    """Best effort: find the number of memories of `namespace` in a /memory/stats answer. Knows
    `{"namespaces": {ns: n | {count: n}}}`, `{"namespaces": [{"namespace": ns, "count": n}]}` and
    `{"namespace": ns, "count"|"total": n}` (when asked with ?namespace=), anywhere in the tree."""
    return _walk(stats, namespace)


def _as_count(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, Mapping):
        for k in _COUNT_KEYS:
            if isinstance(v.get(k), int) and not isinstance(v.get(k), bool):
                return int(v[k])
    return None


def _walk(node: Any, namespace: str) -> int | None:
    """The first count of `namespace` in `node` or below it (depth first)."""
    children: Iterable[Any]
    if isinstance(node, Mapping):
        own = _as_count(node) if node.get("namespace") == namespace else None
        if own is None and namespace in node:
            own = _as_count(node[namespace])
        if own is not None:
            return own
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    return next((c for v in children if (c := _walk(v, namespace)) is not None), None)


def probe_turns(turns: Sequence[Turn], n: int = 5) -> list[Turn]:
    """Distinctive turns spread over the haystack (always including the last distinctive one)."""
    texts: dict[str, int] = {}
    for t in turns:
        texts[t.text] = texts.get(t.text, 0) + 1
    good = [t for t in turns if len(t.text) >= 40 and texts[t.text] == 1] or list(turns)
    if len(good) <= n:
        return good
    step = (len(good) - 1) / (n - 1)
    return [good[round(i * step)] for i in range(n)]


class SearchableWaiter:
    """Polls until every namespace holds all its memories: by /memory/stats when it reports a
    per-namespace count, otherwise by recalling a few distinctive turns of each namespace (their
    own text as the query) until each comes back."""

    def __init__(self, client: RecallClient, expected: Mapping[str, Sequence[Turn]],
                 log: Callable[[str], None] = print) -> None:
        self.client, self.log = client, log
        self.expected = {ns: len({t.id for t in turns}) for ns, turns in expected.items()}
        self.probes = {ns: probe_turns(turns) for ns, turns in expected.items()}
        self.resolvers = {ns: make_id_resolver(ns, turns) for ns, turns in expected.items()}
        self.method = "unknown"

    def _ready_by_stats(self, ns: str) -> bool | None:
        stats = self.client.stats(ns)
        c = namespace_count(stats, ns) if stats is not None else None
        if c is None:
            return None
        self.method = "stats"
        ready = c >= self.expected[ns]
        words = stats.get("keyword_statistics") if isinstance(stats, Mapping) else None
        if ready and isinstance(words, Mapping) and isinstance(words.get("memories"), int):
            # The word counts keyword search weighs by cover all of it: the ranking from now on,
            # not one of a part of the load (which would differ from run to run).
            ready = words["memories"] >= self.expected[ns]
        return ready

    def _ready_by_probe(self, ns: str) -> bool:
        self.method = "probe" if self.method != "stats" else self.method
        remaining = []
        for t in self.probes[ns]:
            try:
                mems, _, _ = self.client.recall(t.full_text[:2000], ns, max_results=10)
            except ApiError:
                remaining.append(t)
                continue
            if t.id not in ranked_ids(mems, self.resolvers[ns]):
                remaining.append(t)
        self.probes[ns] = remaining
        return not remaining

    def wait(self, timeout: float, every: float = 1.0) -> float:
        """→ seconds waited. Namespaces are checked in ingest order (the pipeline is roughly FIFO),
        one at a time. Raises TimeoutError listing the namespaces still incomplete."""
        t0 = last_log = time.monotonic()
        pending = list(self.expected)
        use_stats: bool | None = None
        while pending:
            ns = pending[0]
            ready: bool | None = None
            if use_stats is not False:
                ready = self._ready_by_stats(ns)
                if use_stats is None:
                    use_stats = ready is not None
            if ready is None:
                ready = self._ready_by_probe(ns)
            if ready:
                pending.pop(0)
                continue
            now = time.monotonic()
            if now - t0 > timeout:
                raise TimeoutError(f"{len(pending)} namespaces not searchable after {timeout:.0f}s "
                                   f"(by {self.method}): {pending[:5]}")
            if now - last_log > 30:
                last_log = now
                self.log(f"  waiting for the pipeline: {len(self.expected) - len(pending)}/"
                         f"{len(self.expected)} namespaces searchable ({now - t0:.0f}s, "
                         f"by {self.method})")
            time.sleep(every)
        seen, _ = wait_built(self.client.stats, timeout - (time.monotonic() - t0), every)
        if seen:
            self.log(f"  HNSW builds after the load: {', '.join(sorted(seen))} "
                     f"(done at {time.monotonic() - t0:.0f}s)")
        return time.monotonic() - t0


def wait_built(stats: Callable[[], Any], timeout: float, every: float = 1.0
               ) -> tuple[set[str], float]:
    """Until the index has no HNSW build left that a load called for (`index.builds` in
    `stats()`, the recall API's /memory/stats; none reported: nothing to wait for) → (the builds
    seen, seconds waited). A tier's graph is built at a build tick after its last write: a
    question asked before it is searched by another structure than one asked after (a paired
    run's two recall APIs, asked one after the other, ranked 23 of LongMemEval's 48 questions
    apart), and a recall timed beside it times the build. Raises TimeoutError naming those
    left."""
    t0 = time.monotonic()
    seen: set[str] = set()
    while True:
        answer = stats()
        index = answer.get("index") if isinstance(answer, Mapping) else None
        builds = index.get("builds") if isinstance(index, Mapping) else None
        waited = time.monotonic() - t0
        if not builds:
            return seen, waited
        seen.update(builds)
        if waited > timeout:
            raise TimeoutError(f"HNSW builds not done after {waited:.0f}s: {builds}")
        time.sleep(every)
