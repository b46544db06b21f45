"""`memories` rows as recall reads them: the columns it selects, the record class ranking reads
(`MemoryRecord`), and the `Memory` built from a row without validation (`memory_of`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from operator import itemgetter
from typing import Any

import asyncpg
from totalrecall_schema import Memory
from totalrecall_schema.memories_table import MEMORY_ROW, select_list

#: What recall selects of a memory (the table's contract: `totalrecall_schema.memories_table`).
MEMORY_COLUMNS = select_list(MEMORY_ROW)
#: The same, of the table aliased `m`.
COLUMNS_M = select_list(MEMORY_ROW, "m")

#: Distinct metadata texts whose decoding `memory_of` remembers.
METADATA_CACHE_SIZE = 8192


@lru_cache(maxsize=METADATA_CACHE_SIZE)
def _decoded(text: str) -> dict[str, Any]:
    return dict(json.loads(text) or {})


#: The fields `memory_of` gives (`Memory.relative_time` keeps its default), as `model_construct`
#: would record them.
_GIVEN = frozenset(Memory.model_fields) - {"relative_time"}


def _tier(row: asyncpg.Record) -> str:
    tier = row["tier"]
    return tier if tier in ("hot", "warm", "cold") else "hot"  # type: ignore[no-any-return]


def _row_metadata(row: asyncpg.Record) -> Mapping[str, Any]:
    """A row's metadata, read only, with `superseded_by` when a newer memory replaced this one
    (the indexer's migration 8). Decoded once per distinct text and shared with every row of the
    same metadata: a memory's metadata rarely changes and the same rows come back recall after
    recall (neighbours, keyword hits); docs/perf/2026-11-27-recall-cpu.md."""
    value = row["metadata"]
    decoded = _decoded(value) if isinstance(value, str) else value or {}
    superseded_by = row.get("superseded_by")
    if superseded_by:
        return {**decoded, "superseded_by": superseded_by}
    return decoded  # type: ignore[no-any-return]


def memory_of(row: asyncpg.Record, score: float = 0.0) -> Memory:
    # Not validated: the indexer validated every row it wrote, and a recall reads a hundred rows
    # or more (validating them was a tenth of its CPU time under load). Built as
    # `model_construct` builds it, without its walk of the model's fields for each row.
    return _constructed({
        "id": row["id"], "score": score, "timestamp": row["ts"], "category": row["category"],
        "subcategory": row["subcategory"], "summary": row["summary"], "detail": row["detail"],
        "tier": _tier(row), "namespace": row["namespace"], "actor": row["actor"],
        "severity": row["severity"], "tags": list(row["tags"] or []),
        "metadata": dict(_row_metadata(row)), "relative_time": ""})


def _constructed(fields: dict[str, Any]) -> Memory:
    """`Memory.model_construct(**fields)` for a dict of every field but `relative_time`'s
    default added, in the model's order."""
    m = Memory.__new__(Memory)
    object.__setattr__(m, "__dict__", fields)
    object.__setattr__(m, "__pydantic_fields_set__", set(_GIVEN))
    object.__setattr__(m, "__pydantic_extra__", None)
    object.__setattr__(m, "__pydantic_private__", None)
    return m


def _column(name: str) -> Any:
    """A read-only attribute that is a record's column."""
    return property(itemgetter(name))


class MemoryRecord(asyncpg.Record):
    """A `memories` row as ranking reads it (`ports.Row`): asyncpg's record itself, read by
    column name. Of the hundred rows or more a recall ranks it returns a few, and only those
    become a `Memory` (`memory()`): building one for every row was the largest part of the
    API's own Python code (docs/perf/2026-11-27-recall-api-rows.md)."""

    __slots__ = ()

    # Read through `operator.itemgetter` (no Python frame a read): ranking reads each many times.
    id: str = _column("id")
    namespace: str = _column("namespace")
    timestamp: datetime = _column("ts")
    category: str = _column("category")
    subcategory: str = _column("subcategory")
    summary: str = _column("summary")
    detail: str = _column("detail")
    actor: str = _column("actor")
    severity: str = _column("severity")

    tier: str = property(_tier)  # type: ignore[assignment]
    metadata: Mapping[str, Any] = property(_row_metadata)  # type: ignore[assignment]

    def memory(self) -> Memory:
        return memory_of(self)
