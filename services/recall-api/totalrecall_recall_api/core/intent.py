"""What a question asks about the machine, in the words people use, and which memories answer it.

"why's my box crawling?", "what ate my RAM?", "who touched the nginx config?", "did the backup
container die?", "what can I clean up?": each asks about one kind of the machine's events (its
pressure and hungry processes, a file's writer, reclaimable space, a container's life, the auth
log), mostly in words the event does not hold ("crawling" is not in "System under memory
pressure"). Keyword and vector search then rank whatever shares a word higher: a conversation
that mentions a backup, a cache file's event for "what ate my RAM".

Each intent below is the words that ask for it and a test of the memories that answer it (their
category, subcategory, metadata). A question's intents lift every memory that answers one of
them by the best score times the number it answers (`fusion.lift_by_best`): rank-lexicographic
like named identifiers and hosts, the fused order kept within each level, no weight to tune. A
question with no intent, or whose candidates answer none, is left as it was; so is a namespace
without such memories (a conversation benchmark's).

And a question about the present ("is nginx up now?", "is the web container healthy?") is
about the newest state of what it names: of the state events of one subject (a container, a
unit, a kind of pressure), the newest takes the best score of the group (`newest_state_first`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from totalrecall_schema.taxonomy import CONTAINER_DISK_ADVISED_BYTES

from .conclusions import asked_about, asked_categories
from .fusion import Candidate, by_score, lift_by_best
from .subjects import UNIT_STATES, name_parts, subject
from .supersede import ProcessRow, asks_about_now
from .text import STOPWORDS, shingles, words

#: What these rules read of a stored memory (a `Memory` or a store's row fits).
EventRow = ProcessRow


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


@dataclass(frozen=True)
class Intent:
    name: str
    asked: re.Pattern[str]
    answers: Callable[[EventRow], bool]


def _of(category: str, *subcategories: str) -> Callable[[EventRow], bool]:
    subs = frozenset(subcategories)
    return lambda m: m.category == category and (not subs or m.subcategory in subs)


def _any(*tests: Callable[[EventRow], bool]) -> Callable[[EventRow], bool]:
    return lambda m: any(t(m) for t in tests)


def _written_by(m: EventRow) -> bool:
    """A file event that names the process that wrote the file (as root: fanotify)."""
    return m.category == "file" and bool(m.metadata.get("changed_by"))


def _container_disk_to_reclaim(m: EventRow) -> bool:
    """A container engine's disk report that has something to get back. One that says "nothing
    reclaimable" (its total crossed a threshold, all of it in use; or a few bytes of stopped
    containers) is no answer to what can be cleaned: lifted with the reports that are, it ranked
    first for "what can I prune?". A report without the figure (an older one) is taken as one."""
    if m.category != "system.container" or m.subcategory != "disk":
        return False
    v = m.metadata.get("reclaimable_bytes")
    return not isinstance(v, int | float) or v >= CONTAINER_DISK_ADVISED_BYTES


_SIZE = r"(?:big|bigger|biggest|large\w*|sizes?|space|room|takes?|taking|much|disk|worth)"
INTENTS = (
    # The machine is slow: its pressure events (each names the top processes of its moment).
    Intent("slow", _re(
        r"\b(?:slow\w*|sluggish\w*|crawl\w*|lag\w*|unresponsive|freez\w*|froze|forever|"
        r"struggl\w*|speed (?:\w+ )?up|performance|hogs?|hogg\w*|resources)\b"),
        _of("system.pressure", "memory", "swap", "cpu", "io", "load")),
    # Memory is short, or a process is hungry for it: the memory pressure and those processes.
    # (Not a container's OOM kill: that is its own limit, not the machine's memory.)
    Intent("memory", _re(
        r"\b(?:ram|memory|swap\w*|rss|resident|leak\w*)\b"),
        _any(_of("system.pressure", "memory", "swap"),
             _of("system.process", "high_mem", "oom_kill"))),
    Intent("cpu", _re(r"\b(?:cpu|processor|cores?|load average|fans?|running hot)\b"),
           _any(_of("system.pressure", "cpu", "load"), _of("system.process", "high_cpu"))),
    # Space to get back: caches, old logs, unused images.
    Intent("cleanup", _re(
        r"\b(?:clean\w*|reclaim\w*|prun\w*|purg\w*|vacuum\w*|junk|clutter\w*|"
        r"wast\w*|shrink\w*|disk (?:use|usage)|storage)\b"
        # room to get back, either way round ("free up space", "how much room can I get back")
        r"|\b(?:free\w*|get\w*|recover\w*|make|win)\b[^?!]*\b(?:space|room)\b"
        r"|\b(?:space|room)\b[^?!]*\b(?:back|free\w*|recover\w*|reclaim\w*|wins?)\b"
        # what to delete ("which old files or caches can be removed?")
        r"|\b(?:delet\w*|remov\w*|throw\w* away|get rid of|clear\w*)\b[^?!]*\b(?:space|room|"
        r"disk|caches?|logs?|old|temporary|junk)\b"
        r"|\b(?:caches?|logs?|old|temporary|junk)\b[^?!]*\b(?:delet\w*|remov\w*|throw\w* away|"
        r"get rid of|clear\w*)\b"
        # a cache, the journal, logs: when their size is asked ("npm cache size?"), not when a
        # container is called "cache"
        r"|\b(?:caches?|journal|logs?)\b[^?!]*\b" + _SIZE + r"\b"
        r"|\b" + _SIZE + r"\b[^?!]*\b(?:caches?|journal|logs?)\b"),
        _any(_of("system.storage", "reclaimable"), _container_disk_to_reclaim)),
    # A container's life: started, died, OOM-killed, its health, its engine's disk use. (Not
    # the docker group: that is an account's membership.)
    Intent("containers", _re(r"\b(?:containers?|podman|docker(?! group)|compose|"
                             r"health ?checks?|(?:un)?healthy|images?|volumes?)\b"),
           _of("system.container")),
    # Something failed: the machine's failures, and what a conversation found their cause to
    # be (a diagnosis before the chat it came from).
    Intent("failure", _re(r"\b(?:fail\w*|crash\w*|broke(?! up)|broken|break(?:s|ing)?|errors?|"
                          r"die|dies|died|dying|dead|"
                          r"exit(?:ed)? (?:code|status|with)|oom|went wrong|(?:is|are|went) down)\b"),
           _any(_of("system.service", "fail"), _of("system.container", "die", "oom"),
                _of("system.process", "crash", "oom_kill"), _of("error"), _of("cron", "failed"),
                _of("diagnosis", "root_cause"))),
    # Who (which process, which command) changed a file.
    Intent("writer", _re(
        r"\b(?:who|which (?:process|program|tool|command|user|script|app)|what (?:process|"
        r"program|tool|command|script)?)\b[^?.!]{0,30}?\b(?:changed|changes|modif\w*|edit(?:s|ed|ing)?|touch\w*|"
        r"wr[io]te|rewr[io]te|updat\w*|overwr\w*|tamper\w*|mess\w* with)\b|"
        r"\b(?:changed?|modified|edited|touched|written|rewritten|updated) by\b|"
        r"\bhow did [^?!]+ get (?:modified|changed|edited)\b"),
        _written_by),
    # What changed (a file, a config, a package): "what changed before nginx broke?".
    Intent("changed", _re(
        r"\bwhat (?:\w+ ){0,2}(?:changed|modified|edited|updated)\b|"  # not "what change fixed"
        r"\bwhich (?:\w+ ){0,2}(?:was|were|got|is) (?:changed|modified|edited|updated)\b|"
        r"\b(?:was|were) (?:\S+ ){1,3}(?:changed|modified|edited|created|updated)\b"),
        _any(_of("file", "create", "modify", "delete", "move", "permission_change"),
             _of("system.config"), _of("system.package", "install", "remove", "upgrade"))),
    # Privileges and accounts: the auth log.
    Intent("security", _re(
        r"\b(?:sudo\w*|su|root(?![ -]cause)|password\w*|passwd|shadow|logins?|log in|logged in|"
        r"authenticat\w*|privileg\w*|accounts?|uid|gid|groups?|members?|membership|"
        r"usermod|useradd|"
        r"brute[- ]?force)\b"),
        _of("security")),
)


#: A clause that says when, after the question proper ("what changed | before nginx broke?"):
#: it names the moment asked about, not what is asked for.
_WHEN_CLAUSE = re.compile(r"\s(?:before|after|since|until|while)\s", re.IGNORECASE)


def asked_part(query: str) -> str:
    """The question without a trailing clause that says when ("… before nginx broke")."""
    return _WHEN_CLAUSE.split(query, maxsplit=1)[0]


def intents(query: str) -> tuple[Intent, ...]:
    """The intents a question states (in its asked part)."""
    part = asked_part(query)
    return tuple(i for i in INTENTS if i.asked.search(part))


def routed_first(ranked: Sequence[Candidate], query: str,
                 row: Callable[[str], EventRow | None],
                 conclusions_by_topic: bool = True) -> list[Candidate]:
    """`ranked` with the memories answering the question's intents first (lifted by the best
    score times the number of its intents each answers, component `intent`), sorted; `row(key)`:
    the stored memory of a candidate (None: unknown, not lifted). A question about what a
    conversation concluded (`conclusions.asked_categories`: "what was the cause …") is one more
    intent, answered by those conclusions: the two are weighed alike, so "what caused the slow
    builds?" ranks the diagnosis that matches it and "what's the culprit of the high memory
    use?" the pressure event, each by its fused score. Within each level, the events of a
    subject a word of the question names first (`named_subjects_first`), and of the conclusions
    asked for, those about what the question is about (`conclusions_about_first`, unless
    `conclusions_by_topic` is false). Unchanged without an intent, a named subject or a
    candidate answering one."""
    cands = named_subjects_first(ranked, query, row)
    asked = intents(query)
    concluded = asked_categories(query)
    counts: dict[str, int] = {}
    for c in cands:
        m = row(c.key)
        n = sum(1 for i in asked if m is not None and i.answers(m)) + (c.category in concluded)
        if n:
            counts[c.key] = n
    if counts:
        cands = lift_by_best(cands, lambda c: counts.get(c.key, 0), "intent")
    if concluded and conclusions_by_topic:
        cands = conclusions_about_first(cands, query, concluded)
    return asked_kind_first(named_things_first(cands, query), query, row)


def conclusions_about_first(ranked: list[Candidate], query: str,
                            concluded: frozenset[str]) -> list[Candidate]:
    """The conclusions of the categories a question asks for (`concluded`) handed their scores
    again, those holding more of what it is about (`conclusions.asked_about`) first (component
    `concluded_about`), ties in the order they had. The words that ask for a kind of conclusion
    lift every conclusion of that kind alike (`routed_first`); left in the fused score they
    also rank one conclusion that repeats them over another that names what was asked about:
    "what's my preference regarding the wifi?" put "I prefer restic for the NAS backups"
    before "Never change the wifi settings without asking me". Only among those conclusions,
    in the places they hold: no other memory moves."""
    about = asked_about(asked_part(query))
    group = [c for c in ranked if c.category in concluded]
    if not about or len(group) < 2:
        return ranked
    held = {c.key: len(about & shingles(c.text)) for c in group}
    if len(set(held.values())) < 2:
        return ranked
    order = sorted(group, key=lambda c: held[c.key], reverse=True)  # stable: ties keep order
    if hand_out(order, "concluded_about"):
        ranked.sort(key=by_score, reverse=True)
    return ranked


# --- a thing the question calls by its name ------------------------------------------------------
#: A name joined of parts ("backup-x7.service", "web-frontend", "haproxy.conf", "my_app"): a
#: unit, a container, a file, a host is asked about by it.
_COMPOUND = re.compile(r"(?<![\w./-])([a-z0-9]{2,}(?:[-_.][a-z0-9]{2,})+)(?![\w-])", re.IGNORECASE)


def named_things(query: str) -> frozenset[str]:
    """The compound names a question gives ("why did backup-x fail?" → backup-x)."""
    return frozenset(m.group(1).lower().rstrip(".") for m in _COMPOUND.finditer(query)
                     if not m.group(1).replace(".", "").isdigit())


def _names(text: str, name: str) -> bool:
    """`name` in `text` as a whole name, or as the start of a longer one (backup-x in
    backup-x.service, in /usr/local/bin/backup-x), not inside another (backup-x in
    my-backup-x-old)."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE) is not None


def named_things_first(ranked: Sequence[Candidate], query: str) -> list[Candidate]:
    """`ranked` with the memories naming the things the question names first (lifted by the best
    score times how many of them each names, component `named_thing`), sorted: "why did
    backup-x fail?" is about backup-x, not about a NAS backup a conversation had trouble with,
    however alike they read. Unchanged when the question names none or no memory names one (a
    hyphenated word no memory holds verbatim)."""
    cands = list(ranked)
    names = named_things(asked_part(query))
    if not names or not cands:
        return cands
    counts = {c.key: n for c in cands if (n := sum(1 for x in names if _names(c.text, x)))}
    if not counts or len(counts) == len(cands):
        return cands
    return lift_by_best(cands, lambda c: counts.get(c.key, 0), "named_thing")


# --- a subject the question calls by a word of its name ------------------------------------------
def named_subjects_first(ranked: Sequence[Candidate], query: str,
                         row: Callable[[str], EventRow | None]) -> list[Candidate]:
    """`ranked` with the events of the subjects a word of the question names (a container, a
    unit, a file, an account: `subjects.name_parts`) lifted by the best score (component
    `named_subject`), sorted: "what happened to my cache container?" is about cache-7f3a's
    events before the other containers'. The finest level of `routed_first`: applied before the
    intents' lift, so a word that names a subject orders memories within the kind of memory
    asked for, never across it ("is the apt cache big?" stays with the reclaimable report, not
    a container called cache).

    A word is a name only where nothing else matches the question better: an event that holds
    fewer of the question's words than another memory is not lifted ("why did the NAS backup
    break?" is about the NAS backup a conversation diagnosed, which holds "NAS" and "backup",
    not about a container called backup-7f3a). Unchanged when no subject, or every
    candidate's, is named."""
    cands = list(ranked)
    asked = {w.split("'")[0] for w in words(asked_part(query))} - STOPWORDS
    named = set()
    for c in cands:
        m = row(c.key)
        s = subject(m) if m is not None else None
        if s is not None and name_parts(*s) & asked:
            named.add(c.key)
    if not named or len(named) == len(cands):
        return cands
    held = {c.key: len(asked & shingles(c.text)) for c in cands}
    best_other = max(held[c.key] for c in cands if c.key not in named)
    named = {key for key in named if held[key] >= best_other}
    return lift_by_best(cands, lambda c: int(c.key in named), "named_subject")


# --- the kind of conclusion asked for ------------------------------------------------------------
#: What a conversation found, finer than its category: a cause, or a fix. A reorder within the
#: diagnoses, not a level above the rest: "slow machine: what's the cause?" weighs the pressure
#: event and the diagnoses alike, and of the diagnoses the causes come first.
CONCLUSION_KINDS = (
    (_re(r"\b(?:caus\w*|reasons?|culprit|root|diagnos\w*|went wrong|(?:was|is) wrong|why|"
         r"break\w*|broke)\b"), frozenset({"root_cause"})),
    (_re(r"\b(?:fix\w*|solv\w*|solution|resolv\w*|resolution|workaround|repair\w*)\b"),
     frozenset({"resolution", "workaround"})),
)
DIAGNOSIS = "diagnosis"


def asked_kinds(query: str) -> frozenset[str]:
    """The subcategories of diagnosis a question asks for; empty when it asks for both kinds
    or neither (nothing to put first)."""
    found = [subs for pattern, subs in CONCLUSION_KINDS if pattern.search(query)]
    return found[0] if len(found) == 1 else frozenset()


def asked_kind_first(ranked: Sequence[Candidate], query: str,
                     row: Callable[[str], EventRow | None]) -> list[Candidate]:
    """The diagnoses of each conversation among `ranked` handed their scores again, those of
    the kind the question asks for first (component `conclusion_kind`): "how did we fix …"
    ranks the fix over the cause found in the same conversation, which its words match as
    well. Only within a conversation (`metadata.session`; those without one together): another
    conversation's fix is no answer to how this one was fixed, and keeps its own score."""
    cands = list(ranked)
    kinds = asked_kinds(query)
    if not kinds:
        return cands
    sessions: dict[str | None, list[tuple[Candidate, EventRow]]] = {}
    for c in cands:
        m = row(c.key) if c.category == DIAGNOSIS else None
        if m is not None and m.category == DIAGNOSIS:
            session = m.metadata.get("session")
            sessions.setdefault(str(session) if session else None, []).append((c, m))
    changed = False
    for members in sessions.values():
        order = sorted(members, key=lambda cm: (cm[1].subcategory in kinds, cm[0].score),
                       reverse=True)
        changed = hand_out([c for c, _ in order], "conclusion_kind") or changed
    if changed:
        cands.sort(key=by_score, reverse=True)
    return cands


def hand_out(order: Sequence[Candidate], component: str) -> bool:
    """The scores of `order` (a group of candidates) handed out again in that order, best
    first (the difference recorded as `component`): the group ranks where it did, its members
    in the new order. True when a score changed."""
    changed = False
    for c, score in zip(order, sorted((c.score for c in order), reverse=True), strict=True):
        if score != c.score:
            c.components[component] = round(score - c.score, 6)
            c.score = score
            changed = True
    return changed


# --- the newest state of what a question asks about ---------------------------------------------
_STATE = _re(r"^\s*(?:is|are|isn'?t|aren'?t)\b[^?.!]*\b(?:up|down|running|alive|healthy|"
             r"unhealthy|ok|okay|fine|working|failing|passing|broken|dead)\b")


def asks_for_state(query: str) -> bool:
    """A question about how something is now: "…now", "…currently", "is X still…", and a
    question in the present about a state ("is nginx up?", "is the web container healthy?")."""
    return asks_about_now(query) or bool(_STATE.search(query))


def state_subject(m: EventRow) -> tuple[str, str] | None:
    """What a state event is the state of: a container (its name), a unit (its lifecycle:
    `subjects.UNIT_STATES`), a kind of pressure (its onset and its easing). None: not a state
    event (a process's states are `supersede.py`'s)."""
    if m.category == "system.pressure":
        what = m.metadata.get("pressure")
        return ("pressure", str(what)) if what else None
    s = subject(m)
    if s is None or s[0] not in ("container", "unit") or (
            s[0] == "unit" and m.subcategory not in UNIT_STATES):
        return None
    return s


def newest_state_first(ranked: Sequence[Candidate], query: str,
                       row: Callable[[str], EventRow | None]) -> list[Candidate]:
    """For a question about the present: the state events of each subject handed their
    group's scores again, newest first (component `newest_state`), so the subject ranks where
    it did and its current state leads it. Other memories and other questions: unchanged."""
    cands = list(ranked)
    if not cands or not asks_for_state(query):
        return cands
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for c in cands:
        m = row(c.key)
        subject = state_subject(m) if m is not None else None
        if subject is not None:
            groups.setdefault(subject, []).append(c)
    changed = False
    for members in groups.values():
        newest = sorted(members, key=lambda c: c.timestamp, reverse=True)
        changed = hand_out(newest, "newest_state") or changed
    if changed:
        cands.sort(key=by_score, reverse=True)
    return cands
