"""`totalrecall import <source>`: bring existing history into the memory.

`IMPORTERS` maps each source name to its importer (`base.Importer`: `read(paths, options)`
yields `MemoryEvent`s and `Skip`s in source order). A new source is one module and one entry.
"""

from __future__ import annotations

from .base import Importer, Item, Options, Skip
from .claude_code import ClaudeCodeImporter
from .journal import JournalImporter
from .jsonl import JsonlImporter
from .logs import LogsImporter
from .openclaw import OpenClawImporter
from .shell import ShellImporter

IMPORTERS: dict[str, Importer] = {
    "openclaw": OpenClawImporter(),
    "claude-code": ClaudeCodeImporter(),
    "shell": ShellImporter(),
    "journal": JournalImporter(),
    "logs": LogsImporter(),
    "jsonl": JsonlImporter(),  # what `totalrecall export` wrote: a lossless round trip
}

__all__ = ["IMPORTERS", "Importer", "Item", "Options", "Skip"]
