"""What is no longer true: memories superseded by newer ones.

Two kinds. A fact replaced by a newer one about the same subject ("the user now prefers neovim"
after "the user prefers vim"): the indexer marks the older one (`superseded_by`, from the newer
event's `metadata.subject` or `metadata.supersedes`); `subject_of` gives an event its subject,
and recall ranks a superseded memory far below (`demote_superseded`) unless the question asks
for history ("what editor did I use before?").

And a process that has ended no longer answers a question about now.

"What's using my CPU right now?" matches every `high_cpu` event ever recorded; one whose process
has since exited (a later `exit`/`crash`/`oom_kill` event for the same PID and process name) is
history, not the answer. For questions about the present such memories keep only `factor` of
their score, so the still-running process ranks above them; other questions ("what happened to
PID 4242?") are left alone, since there the ended process is the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from .fusion import Candidate, by_score
from .tools import FAMILIES, tools_in_text

_NOW = re.compile(r"(?i)\b(?:now|right now|currently|current|at the moment|at present|"
                  r"still|is (?:\w+ )?(?:using|eating|hogging|burning)|are (?:\w+ )?using)\b")
#: what a process's own state was: superseded once it ended
STATE_SUBCATEGORIES = frozenset({"high_cpu", "high_mem"})
END_SUBCATEGORIES = frozenset({"exit", "crash", "oom_kill"})


class ProcessRow(Protocol):
    """What these checks read of a stored memory (a `Memory` fits)."""

    @property
    def timestamp(self) -> datetime: ...
    @property
    def category(self) -> str: ...
    @property
    def subcategory(self) -> str: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...


def asks_about_now(query: str) -> bool:
    return bool(_NOW.search(query))


def _ident(m: ProcessRow) -> tuple[int, str] | None:
    pid = m.metadata.get("pid")
    if m.category != "system.process" or not isinstance(pid, int):
        return None
    return pid, str(m.metadata.get("process") or "")


def ends(rows: Iterable[ProcessRow]) -> dict[tuple[int, str], datetime]:
    """(pid, process name) → when it last ended, from the end events among `rows`."""
    out: dict[tuple[int, str], datetime] = {}
    for m in rows:
        ident = _ident(m)
        if ident is None or m.subcategory not in END_SUBCATEGORIES:
            continue
        if ident not in out or out[ident] < m.timestamp:
            out[ident] = m.timestamp
    return out


def _ended(ident: tuple[int, str], at: datetime,
           ended: Mapping[tuple[int, str], datetime]) -> bool:
    pid, name = ident
    for (epid, ename), when in ended.items():
        # A name on either side that disagrees is another process that reused the PID.
        if epid == pid and (not name or not ename or name == ename) and when >= at:
            return True
    return False


def supersede_ended(ranked: Sequence[Candidate], rows: Mapping[str, ProcessRow],
                    ended: Mapping[tuple[int, str], datetime], factor: float) -> list[Candidate]:
    """`ranked` with the state events of ended processes scaled by `factor`, re-sorted."""
    out = list(ranked)
    for c in out:
        m = rows.get(c.key)
        if m is None or m.subcategory not in STATE_SUBCATEGORIES:
            continue
        ident = _ident(m)
        if ident is not None and _ended(ident, m.timestamp, ended):
            cut = c.score * (1.0 - factor)
            c.components["superseded"] = -cut
            c.score -= cut
    out.sort(key=by_score, reverse=True)
    return out


# --- facts replaced by newer ones --------------------------------------------------------------
_HISTORY = re.compile(r"(?i)\b(?:used to|before|previously|formerly|earlier|originally|history|"
                      r"in the past|any more|anymore|no longer|changed|switch(?:ed)? from|old)\b")
#: "prefers X", "now uses X", "switched to X", "X is my favourite editor"
_PREFERENCE = re.compile(
    r"(?i)\b(?:prefers?|preferred|preference|now uses?|switched to|moved to|likes? to use|"
    r"favou?rite|go-to)\b")
#: "prefers tabs for indentation": the topic after for/as
_TOPIC = re.compile(r"(?i)\b(?:prefers?|preferred|now uses?|uses?)\b.{1,60}?\b(?:for|as)\s+"
                    r"(?:the\s+|my\s+|his\s+|her\s+|their\s+|its\s+)?([a-z][\w -]{1,38}?)"
                    r"\s*(?:[.,;!]|$)")
#: the categories and subcategories whose text may state a preference that a later one replaces
_FACT_SUBCATEGORIES = frozenset({"preference", "note", "fact", "habit"})


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w:. -]+", " ", text.lower()).split())[:120]


def subject_of(summary: str, category: str, subcategory: str,
               metadata: Mapping[str, Any]) -> str | None:
    """The subject a memory states a fact about, when a newer fact on it should replace it.

    `metadata.subject` when given (any memory); else, for a user pattern or a stored
    preference/note, a preference the text states: about a family of tools ("prefers neovim",
    "switched to podman" → `prefers:editor`, `prefers:container runtime`) or a topic ("prefers
    tabs for indentation" → `prefers:indentation`). None: nothing replaces it."""
    given = metadata.get("subject")
    if isinstance(given, str) and given.strip():
        return _norm(given)
    if category != "user_pattern" and subcategory not in _FACT_SUBCATEGORIES:
        return None
    if not _PREFERENCE.search(summary):
        return None
    # A qualified preference ("vim for quick edits", "VS Code for big projects") is about its
    # topic, and does not replace one about another topic; "neovim as their editor" is about
    # the family; a bare "prefers neovim" too.
    found = _TOPIC.search(summary)
    topic = _norm(found.group(1)) if found else ""
    family = next((f for f in FAMILIES if topic == f or topic.endswith(" " + f)), None)
    if topic and family is None:
        return f"prefers:{topic}"
    tools = tools_in_text(summary)
    if family or tools:
        return f"prefers:{family or tools[0][0]}"
    return None


def asks_about_history(query: str) -> bool:
    return bool(_HISTORY.search(query))


def superseded(m: ProcessRow) -> bool:
    return bool(m.metadata.get("superseded_by"))


def demote_superseded(ranked: Sequence[Candidate], rows: Mapping[str, ProcessRow],
                      factor: float) -> list[Candidate]:
    """`ranked` with the memories a newer one replaced scaled by `factor`, re-sorted; left out
    when `factor` is 0 (an outdated fact in the prompt misleads more than it helps)."""
    out = list(ranked)
    if factor >= 1:
        return out
    if factor <= 0:
        return [c for c in out if (m := rows.get(c.key)) is None or not superseded(m)]
    for c in out:
        m = rows.get(c.key)
        if m is not None and superseded(m):
            cut = c.score * (1.0 - factor)
            c.components["superseded"] = c.components.get("superseded", 0.0) - cut
            c.score -= cut
    out.sort(key=by_score, reverse=True)
    return out
