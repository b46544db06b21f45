"""Events of one subject that arrive together are one incident: its cause first for a question
why, else its outcome.

A unit that fails logs its cause, then systemd's consequence ("backup.service: Failed at step
EXEC …: Permission denied", then "backup.service: Failed with result 'exit-code'"); a container
starts, then is OOM-killed a second later. Keyword and vector search score the members of such
an incident alike (they share the subject's name and most words), so their order is chance. But
a question picks one:

* "why did backup.service fail?", "what error did it hit?", "what killed the cache container?"
  ask for the cause: the first failure of the incident (a cause comes before what it causes;
  the generic consequence line says less about this unit than its cause does);
* "what happened to the cache container?", "how did the backup run end?", "backup.service
  failed" ask about the incident as a whole: its outcome, the last event (what the subject
  ended in: OOM-killed, not started);
* "who changed haproxy.cfg?" (the writer intent): of one file's writes the last, the change
  that made the file what it is.

Each incident's members are handed their scores again in that order (`intent.hand_out`): the
incident ranks where it did, no weight is added and nothing else moves. "Together": no more
than the neighbour expansion's gap between machine events (`neighbour_event_gap_s`) apart.
A subject is one machine's: nginx.service on two hosts is two. Accounts are no incidents: a new
user and the group it was put in are two facts, both asked for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .fusion import Candidate, by_score
from .intent import INTENTS, EventRow, hand_out, intents
from .subjects import Subject, subject

#: A question that asks for a cause.
_CAUSE = re.compile(r"\b(?:why|reasons?|caus\w*|culprit|(?:what|which) (?:\w+ )?(?:errors?|"
                    r"went wrong|killed))\b", re.IGNORECASE)
_FAILED = {i.name: i for i in INTENTS}["failure"].answers


def asks_cause(query: str) -> bool:
    return bool(_CAUSE.search(query))


def _together(members: Sequence[Candidate], gap_s: float) -> list[list[Candidate]]:
    """`members` (one subject's) in runs whose neighbours are at most `gap_s` apart."""
    runs: list[list[Candidate]] = []
    for c in sorted(members, key=lambda c: c.timestamp):
        if runs and (c.timestamp - runs[-1][-1].timestamp).total_seconds() <= gap_s:
            runs[-1].append(c)
        else:
            runs.append([c])
    return runs


def incident_first(ranked: Sequence[Candidate], query: str,
                   row: Callable[[str], EventRow | None], gap_s: float) -> list[Candidate]:
    """`ranked` with each incident's members in the order the question asks for (component
    `incident`): a question why, its failures first, earliest first; any other, its newest
    event first. Containers and units; a file's writes for a question who changed it."""
    cands = list(ranked)
    kinds = {"container", "unit"}
    if any(i.name == "writer" for i in intents(query)):
        kinds.add("file")
    groups: dict[tuple[Subject, str], list[Candidate]] = {}
    rows: dict[str, EventRow] = {}
    for c in cands:
        m = row(c.key)
        s = subject(m) if m is not None else None
        if m is not None and s is not None and s[0] in kinds:
            groups.setdefault((s, str(m.metadata.get("host") or "")), []).append(c)
            rows[c.key] = m
    cause = asks_cause(query)
    changed = False
    for members in groups.values():
        for incident in _together(members, gap_s):
            if len(incident) < 2:
                continue
            if cause:  # failures first, in the order they happened
                order = sorted(incident, key=lambda c: (not _FAILED(rows[c.key]), c.timestamp))
            else:
                order = sorted(incident, key=lambda c: c.timestamp, reverse=True)
            changed = hand_out(order, "incident") or changed
    if changed:
        cands.sort(key=by_score, reverse=True)
    return cands
