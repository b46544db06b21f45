"""Typed Python client of the Total Recall recall API (see docs/agents.md)."""

from totalrecall_schema import (
    Alert,
    AlertsResponse,
    ForgetResponse,
    IngestEvent,
    IngestResponse,
    Memory,
    RecallResponse,
    TimelineResponse,
)

from .client import DEFAULT_API, DEFAULT_TIMEOUT, AsyncTotalRecallClient, TotalRecallClient
from .errors import (
    TotalRecallAuthError,
    TotalRecallBadRequest,
    TotalRecallConnectionError,
    TotalRecallError,
    TotalRecallHTTPError,
    TotalRecallNotFound,
    TotalRecallServerError,
    TotalRecallTimeout,
)
from .models import (
    AdminResponse,
    FileResponse,
    FlushResponse,
    HealthResponse,
    StatsResponse,
    WarmResponse,
)

__all__ = [
    "DEFAULT_API", "DEFAULT_TIMEOUT", "AdminResponse", "Alert", "AlertsResponse",
    "AsyncTotalRecallClient", "FileResponse",
    "FlushResponse", "ForgetResponse", "HealthResponse", "IngestEvent", "IngestResponse", "Memory",
    "RecallResponse", "StatsResponse", "TimelineResponse", "TotalRecallAuthError",
    "TotalRecallBadRequest", "TotalRecallClient", "TotalRecallConnectionError",
    "TotalRecallError", "TotalRecallHTTPError", "TotalRecallNotFound", "TotalRecallServerError",
    "TotalRecallTimeout", "WarmResponse",
]
