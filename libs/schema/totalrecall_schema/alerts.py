"""Proactive alerts: conditions the recall API finds in the stored events (`GET /memory/alerts`,
the `<system_alerts>` part of a recall's block)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

#: The rules that raise alerts (recall-api `core/alerts.py`).
AlertRule = Literal["disk_filling", "unit_failing", "process_crashing", "service_idle",
                    "reclaimable_space"]
AlertState = Literal["open", "resolved"]


class Alert(BaseModel):
    """One condition about one subject (a filesystem, a unit, a process name). `id` is stable
    (rule + subject): the same condition seen again is the same alert, with a new `last_seen`
    and `count`."""

    id: str = Field(description="rule:subject, stable across detector runs")
    rule: AlertRule
    subject: str = Field(description="the filesystem, unit or process name")
    namespace: str = "default"
    state: AlertState = "open"
    severity: Literal["info", "warning", "error", "critical"] = "warning"
    text: str = Field(description="one line, for a person or a prompt")
    first_seen: datetime
    last_seen: datetime
    count: int = Field(default=1, description="occurrences behind the alert (failures, crashes, "
                                              "level reports)")
    resolved_at: datetime | None = None
    evidence: list[str] = Field(default_factory=list,
                                description="ids of the memories the alert stands on, newest first")


class AlertsResponse(BaseModel):
    alerts: list[Alert]
    namespace: str = "default"
    checked_at: datetime | None = Field(
        default=None, description="when the events were last examined")
