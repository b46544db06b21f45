"""Is the state disk (where `$TOTALRECALL_HOME` lives) full? Ingest says 507 and health says
"degraded" with where and how much is free (the disk-full chaos row)."""

from __future__ import annotations

import shutil
from pathlib import Path

#: Below this much free space the state disk counts as full.
FULL_BELOW_BYTES = 1 << 20


def disk_full(path: Path, below: int | None = None) -> str | None:
    """"<dir>: N bytes free" when the disk holding `path` (or its nearest existing parent) has
    less than `below` bytes free, else None."""
    limit = FULL_BELOW_BYTES if below is None else below
    for candidate in (path, *path.parents):
        if candidate.exists():
            free = shutil.disk_usage(candidate).free
            return f"{candidate}: {free} bytes free" if free < limit else None
    return None
