"""Answers of the endpoints that `totalrecall_schema.api` does not model (yet).

They are deliberately permissive (``extra="allow"``): the contract fixes a few fields and welcomes
more, so whatever else the server sends is kept and reachable as attributes / ``model_extra``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")

    def get(self, key: str, default: Any = None) -> Any:
        """Any field, declared or extra (``stats.get("total")``)."""
        return self.model_dump().get(key, default)


class HealthResponse(_Open):
    """``GET /memory/health``: 200 when ready, 503 (still parsed) when degraded / not ready."""

    status: str = "unknown"
    http_status: int = 200

    @property
    def ok(self) -> bool:
        return self.http_status == 200 and self.status == "ok"


class StatsResponse(_Open):
    """``GET /memory/stats``: counts per category / tier / namespace (whatever the server has)."""


class AdminResponse(_Open):
    """``POST /memory/compact`` and ``POST /memory/rebuild``."""


class FileResponse(_Open):
    """``POST /memory/file``: ``{text, path}``; a missing file gives ``text == ""``."""

    path: str = ""
    text: str = ""


class FlushResponse(_Open):
    """``POST /memory/flush``: what the server kept from the messages before compaction."""


class WarmResponse(_Open):
    """``POST /memory/warm``."""
