"""`TotalRecallClient` and `AsyncTotalRecallClient`: one method per endpoint of the recall API.

Both share the request building and answer parsing below (`_Base`); they differ only in how the
request is sent. Configuration from the environment with `from_env()`:

- ``TOTALRECALL_API``        base URL (default ``http://127.0.0.1:8765``)
- ``TOTALRECALL_API_TOKEN``  bearer token (optional)
- ``TOTALRECALL_NAMESPACE``  namespace used when a call does not name one (optional)
- ``TOTALRECALL_TIMEOUT``    seconds (default 10)
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, Self, TypeAlias, TypeVar
from urllib.parse import urlencode

import httpx
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python
from totalrecall_schema import (
    AlertsResponse,
    ForgetRequest,
    ForgetResponse,
    IngestEvent,
    IngestResponse,
    RecallRequest,
    RecallResponse,
    Timeframe,
    TimelineRequest,
    TimelineResponse,
)

from .errors import (
    TotalRecallConnectionError,
    TotalRecallError,
    TotalRecallTimeout,
    error_from_response,
)
from .models import (
    AdminResponse,
    FileResponse,
    FlushResponse,
    HealthResponse,
    StatsResponse,
    WarmResponse,
)

__all__ = ["DEFAULT_API", "DEFAULT_TIMEOUT", "AsyncTotalRecallClient", "TotalRecallClient"]

DEFAULT_API = "http://127.0.0.1:8765"
DEFAULT_TIMEOUT = 10.0
_VERSION = "0.1.0"

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
EventLike: TypeAlias = IngestEvent | Mapping[str, Any]
TimeoutLike: TypeAlias = float | httpx.Timeout | None


@dataclass(frozen=True)
class _Call(Generic[T]):
    method: str
    path: str
    body: Any
    parse: Callable[[httpx.Response], T]
    ok_statuses: tuple[int, ...] = (200, 201, 202)


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    def parse(response: httpx.Response) -> M:
        try:
            return cls.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            raise TotalRecallError(
                f"{response.request.method} {response.request.url}: unexpected answer "
                f"({exc.__class__.__name__}): {response.text[:300]}") from exc
    return parse


def _health(response: httpx.Response) -> HealthResponse:
    try:
        data = response.json()
    except ValueError:
        data = {"status": "unknown", "detail": response.text[:300]}
    if not isinstance(data, dict):
        data = {"status": "unknown", "detail": data}
    return HealthResponse.model_validate({**data, "http_status": response.status_code})


def _text(response: httpx.Response) -> str:
    return response.text


class _Base:
    """Configuration, request building and answer parsing shared by both clients."""

    def __init__(self, base_url: str | None = None, *, token: str | None = None,
                 namespace: str | None = None, timeout: TimeoutLike = DEFAULT_TIMEOUT,
                 headers: Mapping[str, str] | None = None) -> None:
        self.base_url = (base_url or DEFAULT_API).rstrip("/")
        self.token = token or None
        self.namespace = namespace or None
        self.timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(
            timeout, connect=min(timeout, 3.0) if timeout else None)
        self.headers = {"User-Agent": f"totalrecall-client/{_VERSION}",
                        "Accept": "application/json", **(headers or {})}
        if self.token:
            self.headers["Authorization"] = f"Bearer {self.token}"

    @classmethod
    def from_env(cls, **overrides: Any) -> Self:
        """A client configured from ``TOTALRECALL_API`` / ``_API_TOKEN`` / ``_NAMESPACE`` /
        ``_TIMEOUT``; keyword arguments win over the environment."""
        env = os.environ
        kwargs: dict[str, Any] = {
            "base_url": env.get("TOTALRECALL_API") or DEFAULT_API,
            "token": env.get("TOTALRECALL_API_TOKEN") or None,
            "namespace": env.get("TOTALRECALL_NAMESPACE") or None,
            "timeout": float(env.get("TOTALRECALL_TIMEOUT") or DEFAULT_TIMEOUT),
        }
        kwargs.update(overrides)
        return cls(**kwargs)

    # --- helpers ------------------------------------------------------------------------------
    def _ns(self, namespace: str | None) -> str | None:
        return namespace or self.namespace

    def _event(self, event: EventLike, namespace: str | None) -> dict[str, Any]:
        if isinstance(event, IngestEvent):
            body = event.model_dump(mode="json", exclude_none=True)
        elif isinstance(event, Mapping):
            body = dict(event)
        else:
            raise TypeError(f"an event is an IngestEvent or a mapping, not {type(event).__name__}")
        ns = self._ns(namespace)
        if ns and not body.get("namespace"):
            body["namespace"] = ns
        return body

    def _request_kwargs(self, call: _Call[Any], timeout: TimeoutLike | object) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if call.body is not None:
            kwargs["content"] = json.dumps(to_jsonable_python(call.body))
            kwargs["headers"] = {"Content-Type": "application/json"}
        if timeout is not _UNSET:
            kwargs["timeout"] = timeout
        return kwargs

    def _finish(self, call: _Call[T], response: httpx.Response) -> T:
        if response.status_code not in call.ok_statuses:
            raise error_from_response(response)
        return call.parse(response)

    def _transport_error(self, call: _Call[Any], exc: httpx.HTTPError) -> TotalRecallError:
        where = f"{call.method} {self.base_url}{call.path}"
        if isinstance(exc, httpx.TimeoutException):
            return TotalRecallTimeout(f"{where}: timed out ({exc.__class__.__name__})")
        return TotalRecallConnectionError(f"{where}: {exc.__class__.__name__}: {exc}")

    # --- the endpoints (request side) ---------------------------------------------------------
    def _c_ingest(self, events: EventLike | Sequence[EventLike],
                  namespace: str | None) -> _Call[IngestResponse]:
        if isinstance(events, IngestEvent | Mapping):
            body: Any = self._event(events, namespace)
        else:
            body = [self._event(e, namespace) for e in events]
        return _Call("POST", "/memory/ingest", body, _model(IngestResponse))

    def _c_store(self, summary: str | EventLike, detail: str | None, category: str | None,
                 tags: Sequence[str] | None, metadata: Mapping[str, Any] | None,
                 namespace: str | None, extra: dict[str, Any]) -> _Call[IngestResponse]:
        if isinstance(summary, str):
            event: dict[str, Any] = {"summary": summary, **extra}
            if detail:
                event["detail"] = detail
            if category:
                event["category"] = category
            if tags:
                event["tags"] = list(tags)
            if metadata:
                event["metadata"] = dict(metadata)
            summary = event
        return _Call("POST", "/memory/store", self._event(summary, namespace),
                     _model(IngestResponse))

    def _c_recall(self, query: str, max_results: int, timeframe: Timeframe,
                  category: str | None, namespace: str | None,
                  as_of: datetime | None = None,
                  namespaces: Sequence[str] | None = None,
                  hosts: Sequence[str] | None = None) -> _Call[RecallResponse]:
        ns = self._ns(namespace)
        # Several namespaces: the server unions them with `namespace` only when one is sent,
        # so the default namespace is not read unless asked for.
        scope: dict[str, Any] = ({"namespaces": list(namespaces), **({"namespace": ns} if ns else {})}
                                 if namespaces else {"namespace": ns or "default"})
        if hosts:  # sent only when asked for: an API of before hosts refuses the field
            scope["hosts"] = list(hosts)
        req = RecallRequest(query=query, maxResults=max_results, timeframe=timeframe,
                            category=category, asOf=as_of, **scope)
        return _Call("POST", "/memory/recall",
                     req.model_dump(mode="json", by_alias=True, exclude_none=True,
                                    exclude_unset=True),
                     _model(RecallResponse))

    def _c_timeline(self, hours: float, category: str | None, namespace: str | None,
                    limit: int | None) -> _Call[TimelineResponse]:
        fields: dict[str, Any] = {"hours": hours, "category": category,
                                  "namespace": self._ns(namespace) or "default"}
        if limit is not None:
            fields["limit"] = limit
        req = TimelineRequest(**fields)
        return _Call("POST", "/memory/timeline",
                     req.model_dump(mode="json", exclude_none=True, exclude_unset=True),
                     _model(TimelineResponse))

    def _c_flush(self, messages: Sequence[Any], session_id: str, namespace: str | None,
                 extra: dict[str, Any]) -> _Call[FlushResponse]:
        body: dict[str, Any] = {"messages": list(messages), "sessionId": session_id, **extra}
        if ns := self._ns(namespace):
            body["namespace"] = ns
        return _Call("POST", "/memory/flush", body, _model(FlushResponse))

    def _c_warm(self, session_id: str, namespace: str | None,
                extra: dict[str, Any]) -> _Call[WarmResponse]:
        body: dict[str, Any] = {"sessionId": session_id, **extra}
        if ns := self._ns(namespace):
            body["namespace"] = ns
        return _Call("POST", "/memory/warm", body, _model(WarmResponse))

    def _c_supersede(self, old_id: str, new: str | EventLike,
                     namespace: str | None) -> _Call[IngestResponse]:
        event = {"summary": new} if isinstance(new, str) else self._event(new, None)
        body = {"old_id": old_id, "new": event, "namespace": self._ns(namespace) or "default"}
        return _Call("POST", "/memory/supersede", body, _model(IngestResponse))

    def _c_file(self, path: str, namespace: str | None) -> _Call[FileResponse]:
        # A daily log is shown only as far as this namespace may read it (server-side).
        return _Call("POST", "/memory/file",
                     {"path": path, "namespace": self._ns(namespace) or "default"},
                     _model(FileResponse))

    def _c_forget(self, ids: str | Sequence[str], namespace: str | None) -> _Call[ForgetResponse]:
        req = ForgetRequest(ids=[ids] if isinstance(ids, str) else list(ids),
                            namespace=self._ns(namespace) or "default")
        return _Call("POST", "/memory/forget", req.model_dump(mode="json"),
                     _model(ForgetResponse))

    def _c_export(self, namespace: str | None) -> _Call[str]:
        query = urlencode({"namespace": self._ns(namespace) or "default"})
        return _Call("GET", f"/memory/export?{query}", None, _text)

    def _c_alerts(self, namespace: str | None, state: str) -> _Call[AlertsResponse]:
        query = urlencode({"namespace": self._ns(namespace) or "default", "state": state})
        return _Call("GET", f"/memory/alerts?{query}", None, _model(AlertsResponse))

    def _c_health(self) -> _Call[HealthResponse]:
        return _Call("GET", "/memory/health", None, _health, ok_statuses=(200, 503))

    def _c_stats(self, namespace: str | None = None) -> _Call[StatsResponse]:
        # Without a namespace: every namespace's memories (the client's default is not applied).
        query = f"?{urlencode({'namespace': namespace})}" if namespace else ""
        return _Call("GET", f"/memory/stats{query}", None, _model(StatsResponse))

    def _c_admin(self, what: str, options: dict[str, Any]) -> _Call[AdminResponse]:
        return _Call("POST", f"/memory/{what}", options, _model(AdminResponse))

    def _c_metrics(self) -> _Call[str]:
        return _Call("GET", "/metrics", None, _text)


class _Unset:
    def __repr__(self) -> str:
        return "<default timeout>"


_UNSET: Any = _Unset()


class TotalRecallClient(_Base):
    """Blocking client. Use as a context manager, or call `close()`.

    >>> with TotalRecallClient.from_env() as tr:
    ...     tr.store("The user prefers tabs over spaces", category="user_pattern")
    ...     print(tr.recall("editor preferences").system_memory)
    """

    def __init__(self, base_url: str | None = None, *, token: str | None = None,
                 namespace: str | None = None, timeout: TimeoutLike = DEFAULT_TIMEOUT,
                 headers: Mapping[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None,
                 http_client: httpx.Client | None = None) -> None:
        super().__init__(base_url, token=token, namespace=namespace, timeout=timeout,
                         headers=headers)
        self._own = http_client is None
        self._http = http_client or httpx.Client(transport=transport)

    def close(self) -> None:
        if self._own:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: _Call[T], timeout: TimeoutLike = _UNSET) -> T:
        kwargs = self._request_kwargs(call, self.timeout if timeout is _UNSET else timeout)
        headers = {**self.headers, **kwargs.pop("headers", {})}
        try:
            response = self._http.request(call.method, self.base_url + call.path,
                                          headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise self._transport_error(call, exc) from exc
        return self._finish(call, response)

    def ingest(self, events: EventLike | Sequence[EventLike], *, namespace: str | None = None,
               timeout: TimeoutLike = _UNSET) -> IngestResponse:
        """One event or a list (`IngestEvent` or plain dicts); asynchronous through the pipeline."""
        return self._run(self._c_ingest(events, namespace), timeout)

    def store(self, summary: str | EventLike, detail: str | None = None, *,
              category: str | None = None, tags: Sequence[str] | None = None,
              metadata: Mapping[str, Any] | None = None, namespace: str | None = None,
              timeout: TimeoutLike = _UNSET, **extra: Any) -> IngestResponse:
        """The agent's explicit "remember this"."""
        return self._run(self._c_store(summary, detail, category, tags, metadata, namespace,
                                       extra), timeout)

    def recall(self, query: str, *, max_results: int = 6, timeframe: Timeframe = "auto",
               category: str | None = None, namespace: str | None = None,
               as_of: datetime | None = None, namespaces: Sequence[str] | None = None,
               hosts: Sequence[str] | None = None,
               timeout: TimeoutLike = _UNSET) -> RecallResponse:
        """`as_of`: when the question is asked (default now): relative dates in the query,
        the timeframe and recency count from it. `namespaces`: several read at once (with
        `namespace`, or the client's, when set); the server fuses the hits and renders one block.
        `hosts`: only the memories of events that happened on these hosts."""
        return self._run(self._c_recall(query, max_results, timeframe, category, namespace,
                                        as_of, namespaces, hosts), timeout)

    def timeline(self, hours: float = 24, *, category: str | None = None,
                 namespace: str | None = None, limit: int | None = None,
                 timeout: TimeoutLike = _UNSET) -> TimelineResponse:
        return self._run(self._c_timeline(hours, category, namespace, limit), timeout)

    def flush(self, messages: Sequence[Any], session_id: str, *, namespace: str | None = None,
              timeout: TimeoutLike = _UNSET, **extra: Any) -> FlushResponse:
        return self._run(self._c_flush(messages, session_id, namespace, extra), timeout)

    def warm(self, session_id: str, *, namespace: str | None = None,
             timeout: TimeoutLike = _UNSET, **extra: Any) -> WarmResponse:
        return self._run(self._c_warm(session_id, namespace, extra), timeout)

    def file(self, path: str, *, namespace: str | None = None,
             timeout: TimeoutLike = _UNSET) -> FileResponse:
        return self._run(self._c_file(path, namespace), timeout)

    def forget(self, ids: str | Sequence[str], *, namespace: str | None = None,
               timeout: TimeoutLike = _UNSET) -> ForgetResponse:
        """Forget memories by the ids recall returns, in one namespace, everywhere and for good
        (`forgotten`: how many were found; `missing`: ids found nowhere)."""
        return self._run(self._c_forget(ids, namespace), timeout)

    def supersede(self, old_id: str, new: str | EventLike, *, namespace: str | None = None,
                  timeout: TimeoutLike = _UNSET) -> IngestResponse:
        """Store `new` (a summary or an event) as replacing the memory `old_id`, which recall
        then treats as history."""
        return self._run(self._c_supersede(old_id, new, namespace), timeout)

    def alerts(self, *, namespace: str | None = None, state: Literal["open", "all"] = "open",
               timeout: TimeoutLike = _UNSET) -> AlertsResponse:
        """The proactive alerts (a filesystem filling, a unit failing again and again, …);
        `state="all"` adds the resolved ones."""
        return self._run(self._c_alerts(namespace, state), timeout)

    def health(self, *, timeout: TimeoutLike = _UNSET) -> HealthResponse:
        return self._run(self._c_health(), timeout)

    def export(self, namespace: str | None = None, *,
               timeout: TimeoutLike = _UNSET) -> Iterator[str]:
        """Every memory of a namespace, streamed: one JSON line each (`ExportedMemory`, in key
        order), as the server sent it. A stream cut short raises (never a silent truncation)."""
        call = self._c_export(namespace)
        kwargs = self._request_kwargs(call, self.timeout if timeout is _UNSET else timeout)
        try:
            with self._http.stream(call.method, self.base_url + call.path, headers=self.headers,
                                   **kwargs) as response:
                if response.status_code != 200:
                    response.read()
                    raise error_from_response(response)
                for line in response.iter_lines():
                    if line:
                        yield line
        except httpx.HTTPError as exc:
            raise self._transport_error(call, exc) from exc

    def stats(self, *, namespace: str | None = None,
              timeout: TimeoutLike = _UNSET) -> StatsResponse:
        """Counts by category and tier (of one namespace, or of all), and the indexer's."""
        return self._run(self._c_stats(namespace), timeout)

    def compact(self, *, timeout: TimeoutLike = _UNSET, **options: Any) -> AdminResponse:
        return self._run(self._c_admin("compact", options), timeout)

    def rebuild(self, *, timeout: TimeoutLike = _UNSET, **options: Any) -> AdminResponse:
        return self._run(self._c_admin("rebuild", options), timeout)

    def metrics(self, *, timeout: TimeoutLike = _UNSET) -> str:
        """The Prometheus exposition text of ``GET /metrics``."""
        return self._run(self._c_metrics(), timeout)


class AsyncTotalRecallClient(_Base):
    """The same API as `TotalRecallClient`, every endpoint a coroutine.

    >>> async with AsyncTotalRecallClient.from_env() as tr:
    ...     memories = (await tr.recall("why did postgres fail?")).memories
    """

    def __init__(self, base_url: str | None = None, *, token: str | None = None,
                 namespace: str | None = None, timeout: TimeoutLike = DEFAULT_TIMEOUT,
                 headers: Mapping[str, str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 http_client: httpx.AsyncClient | None = None) -> None:
        super().__init__(base_url, token=token, namespace=namespace, timeout=timeout,
                         headers=headers)
        self._own = http_client is None
        self._http = http_client or httpx.AsyncClient(transport=transport)

    async def aclose(self) -> None:
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, call: _Call[T], timeout: TimeoutLike = _UNSET) -> T:
        kwargs = self._request_kwargs(call, self.timeout if timeout is _UNSET else timeout)
        headers = {**self.headers, **kwargs.pop("headers", {})}
        try:
            response = await self._http.request(call.method, self.base_url + call.path,
                                                headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise self._transport_error(call, exc) from exc
        return self._finish(call, response)

    async def ingest(self, events: EventLike | Sequence[EventLike], *,
                     namespace: str | None = None,
                     timeout: TimeoutLike = _UNSET) -> IngestResponse:
        return await self._run(self._c_ingest(events, namespace), timeout)

    async def store(self, summary: str | EventLike, detail: str | None = None, *,
                    category: str | None = None, tags: Sequence[str] | None = None,
                    metadata: Mapping[str, Any] | None = None, namespace: str | None = None,
                    timeout: TimeoutLike = _UNSET, **extra: Any) -> IngestResponse:
        return await self._run(self._c_store(summary, detail, category, tags, metadata,
                                             namespace, extra), timeout)

    async def recall(self, query: str, *, max_results: int = 6, timeframe: Timeframe = "auto",
                     category: str | None = None, namespace: str | None = None,
                     as_of: datetime | None = None, namespaces: Sequence[str] | None = None,
                     hosts: Sequence[str] | None = None,
                     timeout: TimeoutLike = _UNSET) -> RecallResponse:
        return await self._run(self._c_recall(query, max_results, timeframe, category,
                                              namespace, as_of, namespaces, hosts), timeout)

    async def timeline(self, hours: float = 24, *, category: str | None = None,
                       namespace: str | None = None, limit: int | None = None,
                       timeout: TimeoutLike = _UNSET) -> TimelineResponse:
        return await self._run(self._c_timeline(hours, category, namespace, limit), timeout)

    async def flush(self, messages: Sequence[Any], session_id: str, *,
                    namespace: str | None = None, timeout: TimeoutLike = _UNSET,
                    **extra: Any) -> FlushResponse:
        return await self._run(self._c_flush(messages, session_id, namespace, extra), timeout)

    async def warm(self, session_id: str, *, namespace: str | None = None,
                   timeout: TimeoutLike = _UNSET, **extra: Any) -> WarmResponse:
        return await self._run(self._c_warm(session_id, namespace, extra), timeout)

    async def file(self, path: str, *, namespace: str | None = None,
                   timeout: TimeoutLike = _UNSET) -> FileResponse:
        return await self._run(self._c_file(path, namespace), timeout)

    async def forget(self, ids: str | Sequence[str], *, namespace: str | None = None,
                     timeout: TimeoutLike = _UNSET) -> ForgetResponse:
        return await self._run(self._c_forget(ids, namespace), timeout)

    async def supersede(self, old_id: str, new: str | EventLike, *,
                        namespace: str | None = None,
                        timeout: TimeoutLike = _UNSET) -> IngestResponse:
        return await self._run(self._c_supersede(old_id, new, namespace), timeout)

    async def alerts(self, *, namespace: str | None = None,
                     state: Literal["open", "all"] = "open",
                     timeout: TimeoutLike = _UNSET) -> AlertsResponse:
        return await self._run(self._c_alerts(namespace, state), timeout)

    async def health(self, *, timeout: TimeoutLike = _UNSET) -> HealthResponse:
        return await self._run(self._c_health(), timeout)

    async def export(self, namespace: str | None = None, *,
                     timeout: TimeoutLike = _UNSET) -> AsyncIterator[str]:
        """As `TotalRecallClient.export`."""
        call = self._c_export(namespace)
        kwargs = self._request_kwargs(call, self.timeout if timeout is _UNSET else timeout)
        try:
            async with self._http.stream(call.method, self.base_url + call.path,
                                         headers=self.headers, **kwargs) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise error_from_response(response)
                async for line in response.aiter_lines():
                    if line:
                        yield line
        except httpx.HTTPError as exc:
            raise self._transport_error(call, exc) from exc

    async def stats(self, *, namespace: str | None = None,
                    timeout: TimeoutLike = _UNSET) -> StatsResponse:
        return await self._run(self._c_stats(namespace), timeout)

    async def compact(self, *, timeout: TimeoutLike = _UNSET, **options: Any) -> AdminResponse:
        return await self._run(self._c_admin("compact", options), timeout)

    async def rebuild(self, *, timeout: TimeoutLike = _UNSET, **options: Any) -> AdminResponse:
        return await self._run(self._c_admin("rebuild", options), timeout)

    async def metrics(self, *, timeout: TimeoutLike = _UNSET) -> str:
        return await self._run(self._c_metrics(), timeout)
