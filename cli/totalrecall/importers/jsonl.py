"""The `jsonl` source: a file `totalrecall export` wrote (`GET /memory/export`), read back.

One `ExportedMemory` per line. `read(path)` yields each as a MemoryEvent-shaped dict (id,
timestamp, namespace, category, subcategory, actor, source, summary, detail, metadata with
severity and tags): what `POST /memory/ingest` takes, so exporting, importing and exporting again
gives the same lines (ids are kept, so a repeated import adds nothing). The pipeline's own fields
(`repeat_count`, `last_seen`) cannot be ingested and are left out. Constant memory: one line at a
time. `path` "-" reads standard input.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError
from totalrecall_schema import ExportedMemory

NAME = "jsonl"
HELP = "a JSON-lines export of Total Recall (`totalrecall export`), losslessly"


class BadLine(ValueError):
    """A line that is not an exported memory (`where` is `file:line`)."""

    def __init__(self, where: str, reason: str) -> None:
        self.where, self.reason = where, reason
        super().__init__(f"{where}: {reason}")


def _reason(exc: ValidationError | ValueError) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'line'}: {e['msg']}"
                         for e in exc.errors()[:3])
    return str(exc)


def read_items(path: str | Path, on_bytes: Callable[[int], None] | None = None
               ) -> Iterator[dict[str, Any] | BadLine]:
    """Each line of the file, in order: the memory as an ingestible dict, or why it is not one.
    `on_bytes` gets the size of each line read (a progress bar over the file's size)."""
    name = str(path)
    # Closed in `finally`, also when the caller stops early.
    stream: IO[bytes] = sys.stdin.buffer if name == "-" else open(path, "rb")  # noqa: SIM115
    try:
        for n, raw in enumerate(stream, 1):
            if on_bytes is not None:
                on_bytes(len(raw))
            if not raw.strip():
                continue
            try:
                yield ExportedMemory.model_validate_json(raw).to_event()
            except (ValidationError, ValueError) as exc:
                yield BadLine(f"{name}:{n}", _reason(exc))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def read(path: str | Path, *, on_bad_line: Callable[[BadLine], None] | None = None,
         on_bytes: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """Each memory of the file, in file order. A line that is not an exported memory raises
    `BadLine`, or is passed to `on_bad_line` and skipped."""
    for item in read_items(path, on_bytes):
        if isinstance(item, BadLine):
            if on_bad_line is None:
                raise item
            on_bad_line(item)
        else:
            yield item


class JsonlImporter:
    """The `jsonl` source for the registry of `totalrecall import` (`importers.base.Importer`):
    `IMPORTERS["jsonl"] = JsonlImporter()`. `--namespace` moves every memory into it."""

    name = NAME
    help = HELP

    def read(self, paths: list[Path], opts: Any) -> Iterator[Any]:
        from totalrecall_schema import MemoryEvent

        from .base import Skip  # type: ignore[import-not-found]  # the registry's (same package)

        for path in paths:
            for item in read_items(path):
                if isinstance(item, BadLine):
                    yield Skip(item.reason, item.where)
                    continue
                if getattr(opts, "namespace", None):
                    item["namespace"] = opts.namespace
                try:
                    yield MemoryEvent(**item)
                except ValueError as exc:  # a namespace that cannot be one
                    yield Skip(str(exc).splitlines()[-1][:200], str(path))
