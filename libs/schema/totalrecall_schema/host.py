"""The host an event happened on: its hostname and a stable machine id.

Several machines may feed one memory, so every event says which one it is about
(`EventMetadata.host`, `machine_id`). An event that arrives without one gets the host of the
process that first builds it (`MemoryEvent` fills it on construction): the watcher, the recall
API for `POST /memory/ingest`, the CLI for an import, the indexer for MEMORY.md and for the
Markdown records and messages written before hosts were kept.

The hostname is what people name a machine by ("what failed on db-01?"), compared without case
(RFC 4343). It can change and two machines may share one, so the machine id is kept beside it:
on Linux `/etc/machine-id` (systemd's, stable for the installation's life), else an id generated
once and kept in the Total Recall home. `TOTALRECALL_HOSTNAME` and `TOTALRECALL_MACHINE_ID`
override both: a service in a container sees the container's name and no machine id of the
machine it runs for.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_HOSTNAME_CHARS = 253  # a fully qualified DNS name
MAX_MACHINE_ID_CHARS = 128
MACHINE_ID_FILE = "machine-id"
_SYSTEM_MACHINE_ID = Path("/etc/machine-id")
_MACHINE_ID_RE = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class HostInfo:
    hostname: str
    machine_id: str | None


def normalize_hostname(name: str) -> str:
    """A hostname as it is stored and compared: without case, spaces or a trailing root dot."""
    return name.strip().rstrip(".").lower()[:MAX_HOSTNAME_CHARS]


def _read_id(path: Path) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = path.read_text(encoding="ascii").strip().lower()
        if _MACHINE_ID_RE.match(text):
            return text
    return None


def _kept_id(home: Path) -> str | None:
    """The id generated once for a machine without /etc/machine-id (kept in the home, written
    so that two processes starting at once agree on one: the first link wins). None without a
    home: a process that only builds events (a client, a test) never creates one."""
    path = home / MACHINE_ID_FILE
    found = _read_id(path)
    if found is not None or not home.is_dir():
        return found
    new = uuid.uuid4().hex
    tmp = home / f".{MACHINE_ID_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_text(new + "\n", encoding="ascii")
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # atomic: never replaces an id another process kept first
    except OSError:
        return None  # a read-only home: the events carry the hostname alone
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return _read_id(path)


def _home() -> Path:
    return Path(os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")).expanduser()


@functools.cache
def _resolve(hostname: str | None, machine_id: str | None, home: str) -> HostInfo:
    name = normalize_hostname(hostname or socket.gethostname()) or "localhost"
    mid = (machine_id.strip().lower()[:MAX_MACHINE_ID_CHARS] if machine_id
           else _read_id(_SYSTEM_MACHINE_ID) or _kept_id(Path(home)))
    return HostInfo(name, mid or None)


def local_host(home: Path | None = None) -> HostInfo:
    """This process's host (read once per process and home)."""
    return _resolve(os.environ.get("TOTALRECALL_HOSTNAME") or None,
                    os.environ.get("TOTALRECALL_MACHINE_ID") or None,
                    str(home if home is not None else _home()))


def host_name(value: object) -> str | None:
    """The hostname a metadata `host` value names, normalised: the string itself, or the
    `name` (else `hostname`) of a structured one (`{"name": "ws-1", "ips": [...]}`, which a
    client may have stored as its own metadata before hosts were kept); None when it names none.
    The indexer's `host` column is the same expression (its migration 15)."""
    if isinstance(value, Mapping):
        name = value.get("name")
        value = name if name is not None else value.get("hostname")
    if isinstance(value, str):
        return normalize_hostname(value) or None
    return None


def hostname_of(metadata: object) -> str | None:
    """The host a stored memory's metadata names (normalised), if any."""
    return host_name(metadata.get("host")) if isinstance(metadata, Mapping) else None


def check_publisher_host(publisher: str, event: dict[str, object]) -> str | None:
    """May `publisher` (the host whose host-scoped subject an event came in on) publish `event`
    (its decoded JSON object)? Only its own events: None when `metadata.host` names the
    publisher, or names no host and is missing (then it is filled in with the publisher, in
    place, before the event is validated: validation would fill in the host of the process
    validating it); else the reason it may not."""
    publisher = normalize_hostname(publisher)
    metadata = event.get("metadata")
    if metadata is None:
        metadata = event["metadata"] = {}
    if not isinstance(metadata, dict):
        return f"host {publisher} published an event whose metadata is not an object"
    claimed = metadata.get("host")
    if claimed is None:
        metadata["host"] = publisher
        return None
    name = host_name(claimed)
    if name == publisher:
        return None
    if name is None:
        return f"host {publisher} may not publish events of an unnamed host ({claimed!r:.200})"
    return f"host {publisher} may not publish events of host {name}"
