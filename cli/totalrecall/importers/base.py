"""What every importer shares: its options, what it yields, stable ids, text that fits the API.

An importer reads files (or a command's output) and yields, in source order, either a
`MemoryEvent` (built here, client-side: the secret scrubber runs and a bad record fails with a
clear reason before anything is sent) or a `Skip` (why a record is not imported). Ids are
derived from the source and the record's identity, never random, so importing the same history
again stores nothing new: the indexer upserts by id, JetStream drops a repeat `Nats-Msg-Id`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from pydantic import ValidationError
from totalrecall_schema import MemoryEvent

#: The ingest API's limits (`totalrecall_schema.events`). The summary keeps 100 characters of
#: headroom: secret scrubbing runs after the API's length check and may lengthen it
#: ("[REDACTED…]"), and the embedder re-validates the scrubbed event, dead-lettering any summary
#: over 2,000 characters (10 LongMemEval turns were lost that way).
MAX_SUMMARY_CHARS = 1_900
MAX_DETAIL_CHARS = 32_000


@dataclass(frozen=True)
class Options:
    """What the command line passes to every importer."""

    namespace: str | None = None   # None: the importer's own default (e.g. the OpenClaw agent)
    since: datetime | None = None  # records older than this are skipped


@dataclass(frozen=True)
class Skip:
    """A record not imported, and why (counted per reason in the summary)."""

    reason: str
    where: str = ""


Item: TypeAlias = MemoryEvent | Skip


class Importer(Protocol):
    """One source of `totalrecall import`: `read` yields every record of `paths` in order."""

    name: str
    help: str

    def read(self, paths: list[Path], opts: Options) -> Iterator[Item]: ...


def stable_id(prefix: str, *parts: object) -> str:
    """`<prefix>-<24 hex>`: the same parts give the same id on every run and every machine."""
    digest = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).hexdigest()
    return f"{prefix}-{digest[:24]}"


def split_summary_detail(text: str) -> tuple[str, str]:
    """A text split to fit the API: summary ≤ `MAX_SUMMARY_CHARS` (cut at a space), the rest as
    detail (≤ 32,000)."""
    if len(text) <= MAX_SUMMARY_CHARS:
        return text, ""
    cut = text.rfind(" ", MAX_SUMMARY_CHARS // 2, MAX_SUMMARY_CHARS)
    if cut <= 0:
        cut = MAX_SUMMARY_CHARS
    return text[:cut].rstrip(), text[cut:].strip()[:MAX_DETAIL_CHARS]


def make_event(where: str, **fields: Any) -> Item:
    """A `MemoryEvent` from `fields`, or a `Skip` naming the field that is wrong (a line's
    timestamp in the future, an unknown category, …) so one bad record never stops an import."""
    try:
        return MemoryEvent(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "event"
        return Skip(f"invalid {field}: {first.get('msg', 'invalid')}", where)


def since_filter(items: Iterable[Item], since: datetime | None) -> Iterator[Item]:
    """Events older than `since` become `Skip("before --since")`."""
    for item in items:
        if since is not None and isinstance(item, MemoryEvent) and item.timestamp < since:
            yield Skip("before --since", item.id)
        else:
            yield item


def json_object(text: str, where: str) -> dict[str, Any] | Skip:
    """One JSON object, or why the text is not one."""
    try:
        obj = json.loads(text)
    except ValueError:
        return Skip("not JSON", where)
    return obj if isinstance(obj, dict) else Skip("not a JSON object", where)


def json_lines(lines: Iterable[str], label: str) -> Iterator[tuple[str, dict[str, Any]] | Skip]:
    """`(where, object)` for each non-blank line of a JSON-lines text (`where` = `label:line`),
    a `Skip` for a line that is not a JSON object."""
    for n, line in enumerate(lines, start=1):
        if line.strip():
            where = f"{label}:{n}"
            obj = json_object(line, where)
            yield obj if isinstance(obj, Skip) else (where, obj)


def file_time(path: Path) -> datetime:
    """A file's modification time (UTC): the time of records that carry none."""
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def expand(paths: Iterable[Path], patterns: tuple[str, ...]) -> list[Path]:
    """Files named directly, plus the files under directories matching `patterns` (sorted)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted({f for pat in patterns for f in p.rglob(pat) if f.is_file()})
            out += found
        else:
            out.append(p)
    return out
