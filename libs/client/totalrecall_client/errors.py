"""Exceptions raised by the Total Recall client.

Every error the client raises is a `TotalRecallError`. Transport problems (server down, timeout)
are `TotalRecallConnectionError` / `TotalRecallTimeout`; answers with a 4xx/5xx status are
`TotalRecallHTTPError` subclasses carrying the server's own reason (FastAPI's ``detail``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx


class TotalRecallError(Exception):
    """Base class of every error raised by the client."""


class TotalRecallConnectionError(TotalRecallError):
    """The recall API could not be reached (refused, DNS, reset, …)."""


class TotalRecallTimeout(TotalRecallConnectionError):
    """The recall API did not answer within the timeout."""


class TotalRecallHTTPError(TotalRecallError):
    """The recall API answered with an error status."""

    def __init__(self, method: str, url: str, status_code: int, reason: str, body: Any) -> None:
        self.method = method
        self.url = url
        self.status_code = status_code
        self.reason = reason
        self.body = body
        super().__init__(f"{method} {url} -> {status_code}: {reason}")


class TotalRecallBadRequest(TotalRecallHTTPError):
    """4xx: the request was rejected (validation error, unknown field, bad timeframe, …)."""


class TotalRecallAuthError(TotalRecallBadRequest):
    """401/403: missing or wrong API token."""


class TotalRecallNotFound(TotalRecallBadRequest):
    """404: no such endpoint (an older server?)."""


class TotalRecallServerError(TotalRecallHTTPError):
    """5xx: the server failed (or is not ready: 503)."""


def _format_detail(detail: Any) -> str:
    """FastAPI error bodies: ``{"detail": "text"}`` or a list of validation errors."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = []
        for err in detail:
            if isinstance(err, dict) and "msg" in err:
                loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
                parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
            else:
                parts.append(json.dumps(err, default=str))
        return "; ".join(parts)
    return json.dumps(detail, default=str)


def error_from_response(response: httpx.Response) -> TotalRecallHTTPError:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    if isinstance(body, dict) and "detail" in body:
        reason = _format_detail(body["detail"])
    elif isinstance(body, dict) and "error" in body:
        reason = _format_detail(body["error"])
    elif isinstance(body, str) and body.strip():
        reason = body.strip()[:500]
    else:
        reason = response.reason_phrase or "error"
    status = response.status_code
    cls: type[TotalRecallHTTPError]
    if status in (401, 403):
        cls = TotalRecallAuthError
    elif status == 404:
        cls = TotalRecallNotFound
    elif 400 <= status < 500:
        cls = TotalRecallBadRequest
    elif status >= 500:
        cls = TotalRecallServerError
    else:
        cls = TotalRecallHTTPError
    return cls(response.request.method, str(response.request.url), status, reason, body)
