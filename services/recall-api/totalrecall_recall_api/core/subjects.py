"""What a machine event is about (its subject), and the words that name it.

A container, a unit, a file, an account: most machine events are about one of them, named in
their metadata (`container_name`, `service`, `path`, `user`). People call a subject by a word
of its name: "what happened to my cache container?" (cache-7f3a), "who touched the haproxy
config?" (/etc/haproxy-prod.conf), "why was bob's sudo refused?" (bob). The name's type suffix
(`.service`, `.conf`) is the kind of thing, not its name, and is left out.
"""

from __future__ import annotations

import re

from .supersede import ProcessRow as EventRow
from .text import STOPWORDS

#: A unit's lifecycle (not every line a service logs: a log importer files them all as
#: `system.service`, and its lines are no states).
UNIT_STATES = frozenset({"start", "stop", "restart", "fail", "status_change"})

Subject = tuple[str, str]


def subject(m: EventRow) -> Subject | None:
    """(kind, name) of what an event is about: a container (not the engine's disk report), a
    unit (its lifecycle, and the error lines it logged), a file, an account; None otherwise (a
    process's events are `supersede.py`'s, a log importer's lines have no subject)."""
    md = m.metadata
    if m.category == "system.container":
        name = md.get("container_name") or md.get("container_id")
        return ("container", str(name)) if name and m.subcategory != "disk" else None
    if (m.category == "system.service" and m.subcategory in UNIT_STATES) \
            or m.category == "error":
        unit = md.get("service") or md.get("unit")
        return ("unit", str(unit)) if unit else None
    if m.category == "file":
        return ("file", str(md["path"])) if md.get("path") else None
    if m.category == "security":
        return ("account", str(md["user"])) if md.get("user") else None
    return None


_PART = re.compile(r"[a-z0-9]+")


def name_parts(kind: str, name: str) -> frozenset[str]:
    """The words of a subject's name: backup-x7.service → backup, x7; /etc/nginx-prod.conf →
    nginx, prod (a file by its own name, not its folders'). Numbers and stop words name nothing."""
    n = name.lower()
    if kind == "file":
        n = n.rsplit("/", 1)[-1]
    if kind in ("file", "unit") and "." in n:
        n = n.rsplit(".", 1)[0]
    return frozenset(p for p in _PART.findall(n) if not p.isdigit() and p not in STOPWORDS)
