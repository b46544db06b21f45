"""The rows the alert rules read, from the indexer's `memories` table (read-only).

Every query is bounded to one namespace and walks the (namespace, category, ts) index of the
indexer's schema; the idle check's activity lookup, the only one over every category, runs only
for units that may be idle.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from ..core.alerts import COREDUMP_IDENTIFIER, EventRow

_FIELDS = ("id, namespace, ts, category, subcategory, source, severity, service, summary, "
           "metadata, repeat_count, last_seen")

# The events of the failure/crash rules and their successes, newest first.
_WINDOW_SQL = f"""
SELECT {_FIELDS} FROM memories
WHERE namespace = $1 AND ts >= $2 AND (
       (category = 'system.service' AND subcategory IN ('fail', 'start'))
    OR (category = 'cron' AND subcategory IN ('failed', 'executed'))
    OR (category = 'system.process' AND subcategory IN ('crash', 'oom_kill'))
    OR (category = 'error' AND ts >= $3 AND metadata->>'identifier' = '{COREDUMP_IDENTIFIER}'))
ORDER BY ts DESC LIMIT $4"""

_STORAGE_SQL = f"""
SELECT {_FIELDS} FROM memories
WHERE namespace = $1 AND category = 'system.storage'
  AND subcategory IN ('space_warning', 'inode_warning', 'unmount', 'reclaimable') AND ts >= $2
ORDER BY ts DESC LIMIT $3"""

# Each unit's newest state event (services watcher: `active` in the metadata; journal: fail).
# The units one after another, then each one's newest event: a probe of the indexer's
# (namespace, service, ts) index per unit (its migration 10), where a DISTINCT ON sorted every
# service event of the namespace's history on each pass.
_UNIT_EVENTS = ("FROM memories WHERE namespace = $1 AND category = 'system.service' "
                "AND service IS NOT NULL")
_STATES_SQL = f"""
WITH RECURSIVE units AS (
    (SELECT service {_UNIT_EVENTS} ORDER BY service LIMIT 1)
    UNION ALL
    SELECT (SELECT service {_UNIT_EVENTS} AND service > u.service ORDER BY service LIMIT 1)
    FROM units AS u WHERE u.service IS NOT NULL)
SELECT m.* FROM units AS u CROSS JOIN LATERAL (
    SELECT {_FIELDS} {_UNIT_EVENTS} AND service = u.service ORDER BY ts DESC LIMIT 1) AS m
ORDER BY m.service"""

_ACTIVITY_SQL = """
SELECT service, max(coalesce(last_seen, ts)) AS last FROM memories
WHERE namespace = $1 AND ts >= $2 AND service = ANY($3::text[])
GROUP BY service"""


def _row(r: Any) -> EventRow:
    metadata = r["metadata"]
    if isinstance(metadata, str):
        metadata = json.loads(metadata)
    return EventRow(id=r["id"], namespace=r["namespace"], ts=r["ts"], category=r["category"],
                    subcategory=r["subcategory"], source=r["source"], severity=r["severity"],
                    service=r["service"], summary=r["summary"], metadata=metadata or {},
                    repeat_count=r["repeat_count"], last_seen=r["last_seen"])


class PostgresAlertRows:
    def __init__(self, pool: asyncpg.Pool, timeout: float | None = None) -> None:
        self.pool, self.timeout = pool, timeout

    async def window_rows(self, namespace: str, since: datetime, crash_since: datetime,
                          limit: int) -> list[EventRow]:
        rows = await self.pool.fetch(_WINDOW_SQL, namespace, since, crash_since, limit,
                                     timeout=self.timeout)
        return [_row(r) for r in rows]

    async def storage_rows(self, namespace: str, since: datetime, limit: int) -> list[EventRow]:
        rows = await self.pool.fetch(_STORAGE_SQL, namespace, since, limit, timeout=self.timeout)
        return [_row(r) for r in rows]

    async def unit_states(self, namespace: str) -> list[EventRow]:
        return [_row(r) for r in await self.pool.fetch(_STATES_SQL, namespace,
                                                       timeout=self.timeout)]

    async def last_activity(self, namespace: str, units: Sequence[str],
                            since: datetime) -> dict[str, datetime]:
        if not units:
            return {}
        rows = await self.pool.fetch(_ACTIVITY_SQL, namespace, since, list(units),
                                     timeout=self.timeout)
        return {r["service"]: r["last"] for r in rows}
