"""What a conversation concluded, as memories of their own (pure, rule-based: no LLM).

A conversation turn is stored verbatim; what it settled is buried in it. Each sentence of a
turn is matched against a short list of rules, in order, and the first that fits makes the
sentence a memory of its own (at most one per sentence):

- the user's decisions: an approval ("yes, go ahead") or a refusal ("no, never …", "stop",
  "do not touch …") → `approval` / `granted`, `denied` (`metadata.decision`: approved, refused);
- the user's corrections ("actually, it's …", "no, I meant …") → `user_pattern` / `correction`;
- the user's stated preferences ("I prefer …", "always …", "never …", "please don't …", "from
  now on …") → `user_pattern` / `preference`;
- fixes applied ("fixed it by …", "the fix was …", "restarted nginx", "rolled back …",
  "applied …", "ran `cmd`") → `diagnosis` / `resolution` (the taxonomy's subcategory of a fix);
- diagnoses ("the cause was …", "root cause: …", "it failed because …", "turned out …", "the
  problem is …") → `diagnosis` / `root_cause`.

Decisions, corrections and preferences are the user's alone: an assistant saying "never mind"
or "I prefer to check first" states nobody's preference. Fixes and diagnoses count from anyone.

Conservative on purpose (a wrong conclusion misleads more than a missing one): questions ("should
I restart nginx?"), conditionals ("if the cause is DNS …"), hedges ("maybe the cause is …"),
negated statements ("I didn't restart nginx", "the cause was not DNS"), counterfactuals ("I should
have rolled back"), quoted text ("he said "never use tabs""), block quotes, fenced code blocks
and shell lines (`$ …`) never make a conclusion. The rules are in conclusion_rules.py; their
table with examples is in the service's README ("What a conversation concluded").

A conclusion's id is derived from its turn's id, its rule and its span in the turn's text, so a
redelivered or re-ingested turn yields the same memories (the pipeline stores them once).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from totalrecall_schema import Memory, MemoryEvent

from .conclusion_rules import ASSISTANT, RULES, USER, Rule, candidates, rx
from .supersede import subject_of
from .text import STOPWORDS, words
from .tools import tools_in_text

#: How much of a turn is read (a pasted log or file is not where conclusions are).
MAX_SCAN_CHARS = 20_000
#: A "sentence" longer than this is a log line or a paragraph without punctuation: skipped.
MAX_SENTENCE_CHARS = 600
#: At most this many conclusions per turn (the first ones in the turn).
MAX_PER_TURN = 8
#: The turn before a decision or a correction (what it answers), kept in the memory's detail.
MAX_CONTEXT_CHARS = 400
#: Metadata of the turn every conclusion keeps (where and in which conversation it was said).
INHERITED_METADATA = ("host", "machine_id", "session", "conversation_id", "thread")
#: Subcategories of the conversation category that are no turns: a note is a memory already,
#: a session summary is derived itself.
NOT_TURNS = frozenset({"note", "session_summary"})

# --- what cancels a match -------------------------------------------------------------------
_QUESTION_START = rx(
    r"^(?:should|shall|could|can|would|will|do|does|did|is|are|was|were|may|might|have|has|"
    r"had|must)\s+(?:i|we|you|it|they|he|she|this|that|there|the|my|our)\b"
    r"|^(?:what if|how about|i wonder|wondering|any idea|do you know|is it possible|"
    r"whether)\b")
_CONDITION = rx(r"^(?:if|unless|in case|suppose|supposing|assuming|when|once|whenever|"
                 r"let'?s say|imagine)\b")
_HEDGE = rx(r"\b(?:maybe|perhaps|possibly|probably|presumably|might|may be|may have|could be|"
             r"could have|not sure|unsure|i wonder|i suspect|i guess|guessing|hypothes\w+|"
             r"seems? (?:to be|like)|if|whether|unless|would|hopefully|likely|unclear)\b")
_NEGATION = rx(r"\b(?:not|never|no|nobody|neither|nor|without|cannot|haven'?t|hasn'?t|didn'?t|"
                r"don'?t|doesn'?t|wasn'?t|weren'?t|isn'?t|aren'?t|won'?t|wouldn'?t|couldn'?t|"
                r"can'?t|shouldn'?t|failed to|unable to|tried to|try to|trying to)\b")
_COUNTERFACTUAL = rx(r"\b(?:should|could|would|might|must|may)(?:n'?t| not)? have\s*$"
                      r"|\b(?:will|going to|gonna|want to|need to|have to|plan to|about to|'ll)\s*$")
_CLAUSE_BREAK = re.compile(r"[,;:—–()]|\s-\s|\b(?:but|and then|so|then)\b", re.IGNORECASE)

# --- masking: what is read as no one's conclusion ---------------------------------------------
_FENCE = re.compile(r"(?ms)^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[^\n]*$|\Z)")
_QUOTE_LINE = re.compile(r"(?m)^[ \t]*(?:>|\$ |# \$ |PS> |>>> ).*$")
_INLINE_CODE = re.compile(r"`([^`\n]{1,300})`")
_QUOTED = re.compile(r"\"([^\"\n]{1,400})\"|“([^”\n]{1,400})”|«([^»\n]{1,400})»")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")


def _blank(m: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def _fill_inner(m: re.Match[str]) -> str:
    s = m.group(0)
    return s[0] + "x" * (len(s) - 2) + s[-1]


def masked(text: str) -> str:
    """`text` with what no rule may read blanked out, every character in its place (so spans
    found in it are spans of the text): fenced code blocks, quoted lines (`> …`) and shell lines
    (`$ …`) become spaces, quoted speech spaces between its quotes, and inline code `x`s between
    its backticks (a rule may see that a command was given, not read its words)."""
    text = _FENCE.sub(_blank, text)
    text = _QUOTE_LINE.sub(_blank, text)
    text = _INLINE_CODE.sub(_fill_inner, text)
    return _QUOTED.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1],
                       text)


_SENTENCE_LEAD = re.compile(r"[\s\-*•+>]*(?:\d{1,2}[.)]\s+)?")


def sentences(text: str) -> list[tuple[int, int]]:
    """The spans of the sentences of (masked) `text`: split after . ! ? and at line breaks,
    leading list markers and blanks left out."""
    out: list[tuple[int, int]] = []
    start = 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.start() if m is not None else len(text)
        lead = _SENTENCE_LEAD.match(text, start, end)
        s = lead.end() if lead is not None else start
        e = s + len(text[s:end].rstrip())
        if e > s:
            out.append((s, e))
        if m is not None:
            start = m.end()
    return out


@dataclass(frozen=True)
class Conclusion:
    rule: Rule
    sentence: str  # the sentence as said (whitespace folded)
    start: int  # its span in the text read
    end: int

    def event_id(self, turn_id: str) -> str:
        """Deterministic: the same turn read again gives the same id (stored once)."""
        digest = hashlib.sha256(
            f"{turn_id}\x00{self.rule.name}\x00{self.start}:{self.end}".encode()).hexdigest()
        return f"concl-{digest[:24]}"


def _negated(masked_sentence: str, at: int) -> bool:
    """A negation (or an attempt: "tried to") in the clause before the match, or a modal right
    before it ("should have restarted", "I'll restart")."""
    before = masked_sentence[:at]
    clause = _CLAUSE_BREAK.split(before)[-1] if before else ""
    return bool(_NEGATION.search(clause) or _COUNTERFACTUAL.search(before))


def _question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or bool(_QUESTION_START.match(sentence))


def extract(text: str, role: str | None = None, *,
            rules: Sequence[Rule] = RULES) -> list[Conclusion]:
    """The conclusions `text` states, in its order, at most `MAX_PER_TURN`. `role`: who said it
    (`user`, `assistant`; None or anything else: not known, so only fixes and diagnoses)."""
    who = role if role in (USER, ASSISTANT) else ""
    usable = [r for r in rules if who in r.speakers]
    if not usable or not text:
        return []
    text = text[:MAX_SCAN_CHARS]
    hidden = masked(text)
    if not candidates(hidden.lower(), usable):  # most turns: none of the rules' words at all
        return []
    out: list[Conclusion] = []
    for start, end in sentences(hidden):
        if end - start > MAX_SENTENCE_CHARS:
            continue
        seen = hidden[start:end]
        if not seen.strip(" x`\"“”«»") or _question(seen):
            continue
        for rule in candidates(seen.lower(), usable):
            m = rule.pattern.search(seen)
            if m is None:
                continue
            if rule.hedgeable and (_HEDGE.search(seen) or _CONDITION.match(seen)):
                break  # hedged or conditional: no conclusion of this sentence at all
            if rule.negatable and _negated(seen, m.start()):
                continue
            said = " ".join(text[start:end].split())
            out.append(Conclusion(rule, said, start, end))
            break
        if len(out) >= MAX_PER_TURN:
            break
    return out


# --- turns in, memories out ---------------------------------------------------------------------
_ROLE_PREFIX = re.compile(r"^(user|assistant|agent)\s*:\s*", re.IGNORECASE)


def role_of(event: MemoryEvent) -> str | None:
    """Who said a stored turn: its actor (`user`; `agent`/`assistant`), else the role its text
    opens with ("user: …", as flushed turns are stored). None: not known."""
    actor = event.actor.lower()
    if actor in ("user", "human"):
        return USER
    if actor in ("agent", "assistant", "ai", "bot"):
        return ASSISTANT
    m = _ROLE_PREFIX.match(event.summary)
    if m:
        return USER if m.group(1).lower() == "user" else ASSISTANT
    return None


def is_turn(event: MemoryEvent) -> bool:
    """A conversation turn to read (not a note, a summary, or a memory derived already)."""
    extra = event.metadata.model_extra or {}
    return (event.category == "conversation" and event.subcategory not in NOT_TURNS
            and "derived_from" not in extra)


class Said(Protocol):
    """What a stored turn says (a `MemoryEvent`, a store's row, a `Memory`)."""

    @property
    def summary(self) -> str: ...
    @property
    def detail(self) -> str: ...


def turn_text(event: Said) -> str:
    """The words of a stored turn: its summary without the role it opens with, or its detail
    when that holds the whole turn (a long flushed turn's summary is cut), or both."""
    summary = _ROLE_PREFIX.sub("", event.summary, count=1).strip()
    detail = event.detail.strip()
    if not detail:
        return summary
    if summary.rstrip("…").strip() in detail:
        return detail
    return f"{summary}\n\n{detail}"


def _subject(c: Conclusion, metadata: Mapping[str, Any]) -> str | None:
    """The subject of a stated preference, when a later one should replace it: what
    `subject_of` finds ("prefers podman for containers" → `prefers:containers`), else the
    family of the tool a positive statement names ("always use podman" → `prefers:container
    runtime`). A negative one ("never use vim") replaces nothing."""
    if c.rule.subcategory != "preference":
        return None
    found = subject_of(c.sentence, c.rule.category, c.rule.subcategory, metadata)
    if found:
        return found
    if c.rule.name in ("preference.never", "preference.please_dont") \
            or re.search(r"(?i)\b(?:never|don'?t|do not|avoid|not)\b", c.sentence):
        return None
    tools = tools_in_text(c.sentence)
    return f"prefers:{tools[0][0]}" if tools else None


def derive(turn: MemoryEvent, role: str | None = None,
           context: str | None = None) -> list[MemoryEvent]:
    """The memories of what `turn` concluded, each of its own: same namespace, time, actor,
    host and session as the turn, `metadata.derived_from` its id, `metadata.rule` the rule, the
    sentence as summary. `role`: who said it (else `role_of`); `context`: the turn it answers
    (the detail of a decision or a correction: what was approved, what was corrected)."""
    role = role or role_of(turn)
    found = extract(turn_text(turn), role)
    if not found:
        return []
    extra = turn.metadata.model_extra or {}
    inherited: dict[str, Any] = {k: extra[k] for k in INHERITED_METADATA if extra.get(k)}
    inherited["host"] = turn.metadata.host
    inherited["machine_id"] = turn.metadata.machine_id
    out: list[MemoryEvent] = []
    for c in found:
        metadata: dict[str, Any] = {
            **inherited, "derived_from": turn.id, "rule": c.rule.name,
            "tags": ["derived", c.rule.name.split(".")[0]]}
        if role:
            metadata["speaker"] = role
        if c.rule.decision:
            metadata["decision"] = c.rule.decision
        subject = _subject(c, metadata)
        if subject:
            metadata["subject"] = subject
        detail = ""
        if context and (c.rule.category == "approval" or c.rule.subcategory == "correction"):
            said = " ".join(context.split())
            if len(said) > MAX_CONTEXT_CHARS:
                said = said[:MAX_CONTEXT_CHARS].rsplit(" ", 1)[0] + " …"
            detail = f"In reply to: {said}"
        out.append(MemoryEvent(
            id=c.event_id(turn.id), namespace=turn.namespace, timestamp=turn.timestamp,
            category=c.rule.category, subcategory=c.rule.subcategory, actor=turn.actor,
            source="conclusions", summary=c.sentence, detail=detail, metadata=metadata))
    return out


def derived_first(keys: Sequence[str], turn_of: Mapping[str, str]) -> list[str]:
    """`keys` (ranked, best first) with each memory derived from a turn placed just before that
    turn when the turn ranks above it: the turn's conclusion answers, the turn is its context.
    `turn_of`: a derived memory's key → its turn's key."""
    position = {k: i for i, k in enumerate(keys)}
    early: dict[str, list[str]] = {}
    moved: set[str] = set()
    for k in keys:
        t = turn_of.get(k)
        if t is not None and t in position and position[t] < position[k]:
            early.setdefault(t, []).append(k)
            moved.add(k)
    if not moved:
        return list(keys)
    out: list[str] = []
    for k in keys:
        if k in moved:
            continue
        out.extend(early.get(k, ()))
        out.append(k)
    return out


# --- questions about what was concluded (routed by `intent.routed_first`) --------------------
# Not a bare "why did …": most such questions are about the machine ("why did backup.service
# fail?"), answered by its events; a conversation's diagnosis would be lifted over them for no
# reason but its category (the workstation set's why-failed kind: Hit@5 1.0 → 0.33).
# Each verb in all its forms ("solve", "solved", "solving"), as `intent.CONCLUSION_KINDS` reads
# them: a question's tense or person is no reason to miss what was found. Not a bare stem: "resolv"
# alone is resolv.conf, a file asked about by its name.
_ASKS_DIAGNOSIS = rx(r"\b(?:diagnos\w*|root[ -]cause|caus(?:e|ed|es|ing)|culprit|what went wrong|"
                      r"(?:was|is) wrong|fix(?:ed|es|ing)?|solv(?:e|ed|es|ing)|solution|"
                      r"resolv(?:e|ed|es|ing)|resolution|repair(?:s|ed|ing)?|workaround)\b")
_ASKS_PREFERENCE = rx(r"\b(?:prefer\w*|preference|favou?rite|likes? to|wants? me to|"
                       r"how (?:do|does) (?:i|the user) (?:like|want)|my (?:rules?|defaults?)|"
                       r"(?:ask(?:ed)?|told|tell|want(?:ed)?) you to|"
                       r"correct(?:ed|ion))\b")
_ASKS_APPROVAL = rx(r"\b(?:approv\w*|refus\w*|go[- ]ahead|allowed|said (?:yes|no)|agreed)\b")
_ASKS_CONCLUSION = rx(r"\b(?:conclu\w*|decid\w*|decision|settle[ds]?|outcome|takeaways?)\b")


def asked_about(query: str) -> frozenset[str]:
    """The content words of a question about a conclusion, less those that ask for one: what it
    is about ("what's my preference regarding the wifi?" → regarding, wifi; "what did you do to
    solve the slow builds?" → slow, builds). The asking words route the question to its kind
    of conclusion; once there they tell none of that kind from another."""
    rest = query
    for asking in (_ASKS_CONCLUSION, _ASKS_DIAGNOSIS, _ASKS_PREFERENCE, _ASKS_APPROVAL):
        rest = asking.sub(" ", rest)
    return frozenset(w.split("'")[0] for w in words(rest)) - STOPWORDS


def asked_categories(query: str) -> frozenset[str]:
    """The categories of conclusions a question asks for: "what did we conclude about …" (all
    of them), "what was the fix / the cause …" (diagnosis), "what does the user prefer …"
    (user_pattern), "did I approve …" (approval). Empty: it asks for none."""
    if _ASKS_CONCLUSION.search(query):
        return frozenset({"diagnosis", "approval", "user_pattern"})
    found = set()
    if _ASKS_DIAGNOSIS.search(query):
        found.add("diagnosis")
    if _ASKS_PREFERENCE.search(query):
        # a standing rule ("never change X without asking me") is read as a refusal: it is
        # what the user wants all the same
        found |= {"user_pattern", "approval"}
    if _ASKS_APPROVAL.search(query):
        found.add("approval")
    return frozenset(found)


# --- the user profile ---------------------------------------------------------------------------
def stated(m: Memory) -> bool:
    """A preference or correction the user stated in a conversation (derived from a turn)."""
    return bool(m.metadata.get("derived_from"))


def profile(patterns: Sequence[Memory], limit: int, max_stated: int) -> list[Memory]:
    """The `<user_profile>` lines of a namespace from its current `user_pattern` memories: newest
    first, one per subject (the newest statement of a subject replaces an older one, learned or
    stated, even before the indexer has marked it superseded), at most `max_stated` of them
    stated in conversation (so a talkative week does not push the learned patterns out), at
    most `limit` in all."""
    out: list[Memory] = []
    subjects: set[str] = set()
    n_stated = 0
    for m in sorted(patterns, key=lambda m: m.timestamp, reverse=True):
        if len(out) >= limit:
            break
        subject = m.metadata.get("subject")
        if isinstance(subject, str) and subject:
            if subject in subjects:
                continue
            subjects.add(subject)
        if stated(m):
            if n_stated >= max_stated:
                continue
            n_stated += 1
        out.append(m)
    return out
