"""`totalrecall import <source> [PATH...]`: read a history, send it to `POST /memory/ingest`.

Events are built and validated here (secrets scrubbed, a bad record skipped with its reason),
then sent in batches of at most the API's `max_events_per_request` through the Python client.
Every id is derived from the record, so an import can be re-run (or resumed after a failure) and
adds nothing it already added. A batch the API rejects as invalid is split until the one bad
event is found and skipped; an unreachable API stops the import (exit 1).

Progress: a tqdm bar on a terminal (records read, sent, skipped), nothing otherwise or with
`--json`, which prints one summary object: `{"source", "read", "events", "sent", "duplicates",
"skipped": {reason: count}, "namespaces": {ns: count}, "dry_run", "error"}`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from totalrecall_schema import MemoryEvent

from ..importers import IMPORTERS, Importer, Item, Options, Skip
from ..importers.base import since_filter
from ..importers.journal import JournalUnavailable

#: The recall API's default `max_events_per_request` is 1000; half keeps requests small.
DEFAULT_BATCH = 500
_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

#: Sends one batch; returns how many of them JetStream already had (the API's `duplicates`).
SendFn = Callable[[list[dict[str, Any]]], int]


class Rejected(Exception):
    """The API refused a batch as invalid (4xx other than auth): split it, skip the bad one."""


@dataclass
class Summary:
    source: str
    dry_run: bool = False
    read: int = 0
    sent: int = 0
    duplicates: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    namespaces: Counter[str] = field(default_factory=Counter)
    error: str | None = None

    @property
    def events(self) -> int:
        """Valid, distinct events read (sent unless a dry run)."""
        return sum(self.namespaces.values())

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "dry_run": self.dry_run, "read": self.read,
                "events": self.events, "sent": self.sent, "duplicates": self.duplicates,
                "skipped": dict(self.skipped.most_common()),
                "namespaces": dict(self.namespaces.most_common()), "error": self.error}


def parse_since(value: str) -> datetime:
    """`2026-01-02`, `2026-01-02T10:00[:00][+02:00]` (UTC when no zone), or `7d` / `12h` /
    `30m` / `2w` ago."""
    m = _RELATIVE.match(value.strip())
    if m:
        return datetime.now(UTC) - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a date: {value!r} (2026-01-02, 2026-01-02T10:00, 7d, 12h)") from None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _wire(event: MemoryEvent) -> dict[str, Any]:
    """The event as `POST /memory/ingest` takes it (an `IngestEvent`)."""
    return event.model_dump(mode="json", exclude_none=True)


class _Progress:
    def __init__(self, enabled: bool, source: str) -> None:
        self.bar: Any = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(desc=f"import {source}", unit=" records", dynamic_ncols=True,
                            file=sys.stderr)

    def update(self, s: Summary) -> None:
        if self.bar is not None:
            self.bar.n = s.read
            self.bar.set_postfix(sent=s.sent, skipped=sum(s.skipped.values()), refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _send_split(batch: list[dict[str, Any]], send: SendFn, s: Summary) -> None:
    """Send a batch; when the API rejects it, halve it until the bad event is alone: skip it."""
    try:
        s.duplicates += send(batch)
        s.sent += len(batch)
    except Rejected as exc:
        if len(batch) == 1:
            s.skipped[f"rejected by the API: {str(exc)[:160]}"] += 1
            return
        mid = len(batch) // 2
        _send_split(batch[:mid], send, s)
        _send_split(batch[mid:], send, s)


def run_import(items: Iterable[Item], summary: Summary, send: SendFn | None, *,
               batch_size: int = DEFAULT_BATCH, progress: bool = False) -> Summary:
    """Read every item, send the events in batches (`send` None: a dry run, nothing sent).
    Repeats of an id already seen in this run are skipped (the store would keep one anyway)."""
    bar = _Progress(progress, summary.source)
    seen: set[str] = set()
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        if batch and send is not None:
            _send_split(list(batch), send, summary)
        batch.clear()
        bar.update(summary)

    try:
        for item in items:
            summary.read += 1
            if isinstance(item, Skip):
                summary.skipped[item.reason] += 1
                continue
            if item.key in seen:
                summary.skipped["same id as an earlier record of this import"] += 1
                continue
            seen.add(item.key)
            summary.namespaces[item.namespace] += 1
            batch.append(_wire(item))
            if len(batch) >= batch_size:
                flush()
            elif summary.read % 200 == 0:
                bar.update(summary)
        flush()
    finally:
        bar.close()
    return summary


def client_send(client: Any) -> SendFn:
    """A `SendFn` over `totalrecall_client.TotalRecallClient`."""
    from totalrecall_client.errors import TotalRecallAuthError, TotalRecallBadRequest

    def send(batch: list[dict[str, Any]]) -> int:
        try:
            return int(client.ingest(batch).duplicates)
        except TotalRecallAuthError:
            raise
        except TotalRecallBadRequest as exc:
            raise Rejected(getattr(exc, "reason", str(exc))) from exc
    return send


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="totalrecall import",
        description="Bring existing history into the memory. Idempotent: re-running an import "
                    "adds nothing it already added.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="sources:\n" + "\n".join(f"  {name:<12} {imp.help}"
                                        for name, imp in IMPORTERS.items()))
    p.add_argument("source", choices=list(IMPORTERS), help="what to import")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                   help="files or directories (each source has a default: see below)")
    p.add_argument("--namespace", help="memory namespace (default: `default`; OpenClaw: the "
                                       "agent's own, as the bridge uses)")
    p.add_argument("--since", type=parse_since,
                   help="only records from then on (2026-01-02, 2026-01-02T10:00, 7d, 12h); the "
                        "live journal needs it")
    p.add_argument("--dry-run", action="store_true", help="read and validate, send nothing")
    p.add_argument("--json", action="store_true", help="print a JSON summary, no progress bar")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH,
                   help=f"events per request (default {DEFAULT_BATCH}; the API's limit is 1000)")
    return p


def _print_human(s: Summary, out: TextIO) -> None:
    done = (f"would send {s.events}" if s.dry_run
            else f"sent {s.sent} ({s.duplicates} already in the stream)")
    print(f"{s.source}: read {s.read} records, {done} memories, "
          f"skipped {sum(s.skipped.values())}", file=out)
    for ns, n in s.namespaces.most_common():
        print(f"  namespace {ns}: {n}", file=out)
    for reason, n in s.skipped.most_common():
        print(f"  skipped {n}: {reason}", file=out)
    if s.error:
        print(f"error: {s.error}", file=out)


def main(argv: Sequence[str] | None = None, *, client: Any = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.namespace is not None:
        from totalrecall_schema.events import NAMESPACE_PATTERN

        if not re.match(NAMESPACE_PATTERN, args.namespace):
            print(f"totalrecall import: bad namespace {args.namespace!r}", file=sys.stderr)
            return 2
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"totalrecall import: no such file or directory: {', '.join(missing)}",
              file=sys.stderr)
        return 2
    importer: Importer = IMPORTERS[args.source]
    opts = Options(namespace=args.namespace, since=args.since)
    summary = Summary(source=args.source, dry_run=args.dry_run)
    send: SendFn | None = None
    own_client = None
    if not args.dry_run:
        if client is None:
            from totalrecall_client import TotalRecallClient

            client = own_client = TotalRecallClient.from_env(timeout=120.0)
        send = client_send(client)
    progress = not args.json and sys.stderr.isatty()
    code = 0
    try:
        items = since_filter(importer.read(args.paths, opts), args.since)
        run_import(items, summary, send, batch_size=max(1, min(args.batch_size, 1000)),
                   progress=progress)
    except (JournalUnavailable, OSError) as exc:
        summary.error = str(exc)
        code = 2
    except Exception as exc:  # the API down or refusing: what was sent stays; re-run is safe
        from totalrecall_client.errors import TotalRecallError

        if not isinstance(exc, TotalRecallError):
            raise
        summary.error = f"{exc} (sent so far: {summary.sent}; re-running the import is safe)"
        code = 1
    finally:
        if own_client is not None:
            own_client.close()
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2))
    else:
        _print_human(summary, sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main())
