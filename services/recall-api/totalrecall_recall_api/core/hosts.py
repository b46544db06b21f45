"""Hosts in recall: the filter a request names, and the host a question names.

Several machines may feed one memory (`totalrecall_schema.host`). A request may be limited to
some hosts (`RecallRequest.host`/`hosts`): only their memories leave. A question that names a
host the namespace knows ("what failed on db-01 last night?") is about that machine: its
memories come first, in their fused order, then the rest, as the memories naming a question's
identifiers do (`named.py`): a rank-lexicographic rule, not a weight to tune. The others stay
after them: the host may have nothing about the question, and a failure elsewhere is still an
answer. A host is named by its whole name or by its first label ("db-01" for
db-01.example.com), compared without case. A machine event's neighbours (its context) are of its
own host (`same_context`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from totalrecall_schema.host import hostname_of

from .fusion import Candidate, lift_by_best
from .neighbours import in_session

#: A token that may be a hostname: letters, digits, dots, hyphens, underscores.
_TOKEN = re.compile(r"[a-z0-9][a-z0-9._-]*", re.IGNORECASE)


def _names(host: str) -> set[str]:
    """The names a host goes by: its whole name and its first label."""
    return {host, host.split(".", 1)[0]}


def named_hosts(query: str, known: Collection[str]) -> frozenset[str]:
    """The known hosts (normalised hostnames) a question names."""
    if not known:
        return frozenset()
    tokens: set[str] = set()
    for m in _TOKEN.finditer(query):
        t = m.group(0).lower().rstrip("._-")  # "db-01." at the end of a sentence
        if t:
            tokens |= _names(t)
    return frozenset(h for h in known if _names(h) & tokens)


def host_allowed(metadata: Mapping[str, Any], allowed: Collection[str] | None) -> bool:
    """Whether a memory (its metadata) passes a request's host filter (None: every host)."""
    return allowed is None or hostname_of(metadata) in allowed


def same_context(hit: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    """Whether a memory beside a hit in its thread (metadata of each) is the hit's context.
    A machine's thread is a source's events about one service: on another host the same
    service is another machine's, no context of the hit. A conversation is one thread whatever
    host its turns came through. An unknown host is no evidence either way."""
    if in_session(hit):
        return True
    a, b = hostname_of(hit), hostname_of(row)
    return a is None or b is None or a == b


def hosts_first(ranked: Iterable[Candidate], hosts: Collection[str],
                host_of: Callable[[str], str | None]) -> list[Candidate]:
    """`ranked` with the memories of `hosts` first (each lifted by the best score, component
    `host`), sorted. `host_of`: a candidate's host by its key (None: unknown)."""
    cands = list(ranked)
    if not hosts or not cands:
        return cands
    return lift_by_best(cands, lambda c: int(host_of(c.key) in hosts), "host")
