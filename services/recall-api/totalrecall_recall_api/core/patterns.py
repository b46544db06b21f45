"""Learning the user's patterns from what is remembered (pure: memories in, patterns out).

Three learners, each with a minimum number of observations and a confidence (the design's
`patterns.minObservations`; docs/design.md §13), each pattern citing its evidence (the ids
of the memories it was learned from):

- work sessions: the hours and weekdays the user is active (their conversation turns, logins
  and logouts, the interactive tools they run);
- preferred tools: per family (editor, shell, terminal, browser, container runtime), the tool
  the user runs or names most;
- recurring tasks: the same request or command on several days at the same hour (and weekday).

No LLM: counting, so a pattern says what it counted ("in 12 of 14 editor observations").
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from typing import Any, Protocol

from totalrecall_schema.templates import template_form

from .tools import tool_of, tools_in_text

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_COMMAND = re.compile(r"(?m)^command: (.+)$")
#: what the learners never read: their own output and the session summaries
_LEARNED_SUBCATEGORIES = frozenset({"session_summary"})


class Row(Protocol):
    id: str
    timestamp: datetime
    category: str
    subcategory: str
    actor: str
    summary: str
    detail: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Options:
    #: the design's `patterns.minObservations`: fewer observations make no pattern
    min_observations: int = 3
    #: a pattern needs at least this confidence (share of its observations that agree)
    min_confidence: float = 0.6
    #: an hour counts as a working hour when the user was active in it on this share of days
    active_share: float = 0.5
    max_evidence: int = 20


@dataclass
class Pattern:
    kind: str  # the user_pattern subcategory: work_session, preference, habit
    subject: str  # what the pattern is about; a newer pattern of the subject supersedes it
    summary: str
    detail: str
    confidence: float
    observations: int
    evidence: list[str] = field(default_factory=list)  # memory ids, newest first
    first_seen: datetime | None = None
    last_seen: datetime | None = None

    def event_id(self, namespace: str) -> str:
        """Deterministic: the same pattern learned again is the same memory (an update, not a
        copy); a changed one is a new memory that supersedes the old (same subject)."""
        digest = hashlib.sha256(f"{namespace}\x00{self.subject}\x00{self.summary}".encode())
        return f"pattern-{digest.hexdigest()[:24]}"


# --- what counts as what ------------------------------------------------------------------------
def learnable(m: Row) -> bool:
    return m.category != "user_pattern" and m.subcategory not in _LEARNED_SUBCATEGORIES


def user_activity(m: Row) -> bool:
    """A memory that shows the user at the keyboard: their own words, a login or logout (the
    sessions watcher), an interactive tool they run (the process watcher)."""
    if not learnable(m):
        return False
    if m.category == "conversation":
        return m.actor == "user"
    if m.category == "security" and m.subcategory in ("login", "logout"):
        return True
    return bool(tools_of(m)) and m.category == "system.process"


def _commands(m: Row) -> list[str]:
    return [c.strip() for c in _COMMAND.findall(m.detail or "")]


def tools_of(m: Row) -> list[tuple[str, str]]:
    """The tools a memory shows the user using: the process a watcher saw (its name, its
    command), or the tools the user names in their own words."""
    if m.category == "system.process":
        found: list[tuple[str, str]] = []
        named = tool_of(str(m.metadata.get("process") or ""))
        if named:
            found.append(named)
        for cmd in _commands(m):
            first = tool_of(cmd.split()[0]) if cmd.split() else None
            if first and first not in found:
                found.append(first)
        return found
    if m.category == "conversation" and m.actor == "user":
        return tools_in_text(m.summary.removeprefix("user: "))
    return []


def task_of(m: Row) -> str | None:
    """What a recurring task is, as a template: the command the user ran (program and
    subcommand) or their request (its words, numbers and ids masked)."""
    if not learnable(m):
        return None
    if m.category == "system.process":
        for cmd in _commands(m):
            words = [w.rsplit("/", 1)[-1] for w in cmd.split()[:2] if not w.startswith("-")]
            if words:
                return "$ " + " ".join(words)
        return None
    if m.category == "conversation" and m.actor == "user":
        text = " ".join(m.summary.removeprefix("user: ").split()[:12]).lower().rstrip(".?!")
        # The template's placeholders ("<n>", "<ip>") read as "…" in the pattern's text.
        return re.sub(r"<[a-z_]+>", "…", template_form(text)) if len(text) >= 8 else None
    if m.category == "cron":
        return None  # the machine's schedule, not the user's habit
    return None


# --- helpers -----------------------------------------------------------------------------------
def _local(ts: datetime, tz: tzinfo) -> datetime:
    return ts.astimezone(tz)


def _ranges(hours: Iterable[int]) -> list[tuple[int, int]]:
    """Contiguous hours as [start, end) ranges: {9, 10, 11, 14} → [(9, 12), (14, 15)]."""
    out: list[tuple[int, int]] = []
    for h in sorted(set(hours)):
        if out and out[-1][1] == h:
            out[-1] = (out[-1][0], h + 1)
        else:
            out.append((h, h + 1))
    return out


def _weekday_text(days: Iterable[int]) -> str:
    ds = sorted(set(days))
    if ds == list(range(7)):
        return "every day"
    parts = [f"{WEEKDAYS[a]}–{WEEKDAYS[b - 1]}" if b - a > 2 else
             ", ".join(WEEKDAYS[d] for d in range(a, b)) for a, b in _ranges(ds)]
    return ", ".join(parts)


def _evidence(rows: Sequence[Row], n: int) -> list[str]:
    return [m.id for m in sorted(rows, key=lambda m: m.timestamp, reverse=True)[:n]]


def _tz_name(tz: tzinfo) -> str:
    return str(getattr(tz, "key", None) or tz.tzname(None) or "UTC")


# --- the learners ------------------------------------------------------------------------------
def work_sessions(rows: Sequence[Row], opts: Options, tz: tzinfo) -> list[Pattern]:
    """The hours and weekdays the user is usually active."""
    active = [m for m in rows if user_activity(m)]
    by_day: dict[date, list[Row]] = defaultdict(list)
    for m in active:
        by_day[_local(m.timestamp, tz).date()].append(m)
    if len(by_day) < opts.min_observations:
        return []
    days_in_hour: dict[int, set[date]] = defaultdict(set)
    for d, ms in by_day.items():
        for m in ms:
            days_in_hour[_local(m.timestamp, tz).hour].add(d)
    need = max(opts.min_observations, opts.active_share * len(by_day))
    hours = [h for h, ds in days_in_hour.items() if len(ds) >= need]
    if not hours:
        return []
    # The weekdays: those with activity on at least half the weeks the observations span.
    first, last = min(by_day), max(by_day)
    weeks = max(1, ((last - first).days + 1 + 6) // 7)
    per_weekday = Counter(d.weekday() for d in by_day)
    weekdays = [w for w, n in per_weekday.items() if n >= max(1.0, opts.active_share * weeks)]
    inside = [m for m in active if _local(m.timestamp, tz).hour in hours
              and _local(m.timestamp, tz).weekday() in weekdays]
    confidence = len(inside) / len(active)
    if confidence < opts.min_confidence:
        return []
    spans = ", ".join(f"{a:02d}:00–{b:02d}:00" for a, b in _ranges(hours))
    when = f"{_weekday_text(weekdays)} {spans} ({_tz_name(tz)})"
    firsts = [min(ms, key=lambda m: m.timestamp) for _, ms in sorted(by_day.items())]
    return [Pattern(
        kind="work_session", subject="schedule:work_sessions",
        summary=f"User's work sessions: {when}",
        detail=(f"Active on {len(by_day)} days between {first} and {last}; {len(inside)} of "
                f"{len(active)} activity events (turns, logins, interactive tools) fall in "
                f"these hours. Learned by counting, refreshed in the background."),
        confidence=round(confidence, 3), observations=len(by_day),
        evidence=_evidence(firsts, opts.max_evidence),
        first_seen=min(m.timestamp for m in active), last_seen=max(m.timestamp for m in active))]


def preferred_tools(rows: Sequence[Row], opts: Options,
                    since: Mapping[str, datetime] | None = None) -> list[Pattern]:
    """Per family, the tool the user uses most. `since`: subject → a moment before which the
    family's observations no longer count (a newer explicit statement of the preference:
    learning resumes from it)."""
    seen: dict[str, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for m in rows:
        if not learnable(m):
            continue
        for family, tool in tools_of(m):
            cut = (since or {}).get(f"prefers:{family}")
            if cut is None or m.timestamp > cut:
                seen[family][tool].append(m)
    out: list[Pattern] = []
    for family, tools in sorted(seen.items()):
        # An observation is a day the tool was used (a run's busy and exit events are one use).
        days = {tool: {m.timestamp.date() for m in ms} for tool, ms in tools.items()}
        total = sum(len(d) for d in days.values())
        tool = max(tools, key=lambda t: (len(days[t]), max(m.timestamp for m in tools[t])))
        ms, n = tools[tool], len(days[tool])
        confidence = n / total
        if n < opts.min_observations or confidence < opts.min_confidence:
            continue
        others = ", ".join(f"{t} {len(d)}" for t, d in sorted(days.items()) if t != tool)
        out.append(Pattern(
            kind="preference", subject=f"prefers:{family}",
            summary=f"User prefers {tool} as their {family}",
            detail=(f"{tool} on {n} of {total} days of {family} use"
                    + (f" (others: {others})" if others else "")
                    + "; from the processes the user runs and their own words."),
            confidence=round(confidence, 3), observations=n,
            evidence=_evidence(ms, opts.max_evidence),
            first_seen=min(m.timestamp for m in ms), last_seen=max(m.timestamp for m in ms)))
    return out


def recurring_tasks(rows: Sequence[Row], opts: Options, tz: tzinfo) -> list[Pattern]:
    """The same request or command on several days at about the same hour: a habit."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for m in rows:
        task = task_of(m)
        if task:
            groups[task].append(m)
    out: list[Pattern] = []
    for task, ms in sorted(groups.items()):
        days = {_local(m.timestamp, tz).date() for m in ms}
        if len(days) < opts.min_observations:
            continue
        # One occurrence per day (the first): a task run ten times one morning is one day's.
        first = [min((m for m in ms if _local(m.timestamp, tz).date() == d),
                     key=lambda m: m.timestamp) for d in sorted(days)]
        hour, _ = Counter(_local(m.timestamp, tz).hour for m in first).most_common(1)[0]
        near = [m for m in first if abs(_local(m.timestamp, tz).hour - hour) <= 1]
        at_hour = len(near) / len(first)
        weekday, on_day = Counter(_local(m.timestamp, tz).weekday() for m in near).most_common(1)[0]
        weekly = on_day == len(near) and len(near) >= opts.min_observations \
            and len({_local(m.timestamp, tz).isocalendar()[1] for m in near}) == len(near)
        if len(near) < opts.min_observations or at_hour < opts.min_confidence:
            continue
        when = f"every {WEEKDAYS[weekday]}" if weekly else "on most days"
        what = f"runs `{task[2:]}`" if task.startswith("$ ") else f"asks: \"{task}\""
        out.append(Pattern(
            kind="habit", subject="habit:" + hashlib.sha256(task.encode()).hexdigest()[:16],
            summary=f"User {what} {when} around {hour:02d}:00 ({_tz_name(tz)})",
            detail=(f"Seen on {len(days)} days, {len(near)} of them within an hour of "
                    f"{hour:02d}:00" + (f", each a {WEEKDAYS[weekday]}" if weekly else "") + "."),
            confidence=round(at_hour, 3), observations=len(near),
            evidence=_evidence(near, opts.max_evidence),
            first_seen=min(m.timestamp for m in near), last_seen=max(m.timestamp for m in near)))
    return out


def learn(rows: Sequence[Row], opts: Options, tz: tzinfo,
          since: Mapping[str, datetime] | None = None) -> list[Pattern]:
    """Every learner over the same memories."""
    return [*work_sessions(rows, opts, tz), *preferred_tools(rows, opts, since),
            *recurring_tasks(rows, opts, tz)]
