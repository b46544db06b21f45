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
and shell lines (`$ …`) never make a conclusion. The table of rules with examples is in the
service's README ("What a conversation concluded").

A conclusion's id is derived from its turn's id, its rule and its span in the turn's text, so a
redelivered or re-ingested turn yields the same memories (the pipeline stores them once).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from totalrecall_schema import Memory, MemoryEvent

from .fusion import Candidate, lift_by_best
from .supersede import subject_of
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

USER = "user"
ASSISTANT = "assistant"
_ANYONE = frozenset({USER, ASSISTANT, ""})
_USER_ONLY = frozenset({USER})


@dataclass(frozen=True)
class Rule:
    name: str
    category: str
    subcategory: str
    pattern: re.Pattern[str]
    #: the roles whose words the rule reads ("" : a turn whose speaker is not known)
    speakers: frozenset[str]
    #: a negation before the match in its clause ("I didn't restart …") cancels it
    negatable: bool = False
    #: a hedge or a condition anywhere in the sentence cancels it ("maybe the cause is …")
    hedgeable: bool = False
    #: words every match holds one of (lower case): a sentence without any is not searched
    #: (most sentences conclude nothing, and a word test is far cheaper than the search)
    needs: tuple[str, ...] = ()

    @property
    def decision(self) -> str | None:
        if self.category != "approval":
            return None
        return "approved" if self.subcategory == "granted" else "refused"


def _re(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# --- the pieces the rules are made of ----------------------------------------------------------
_LEAD = (r"(?:(?:ok(?:ay)?|so|well|and|hmm+|oh|right|alright|please|thanks|thank you|actually)"
         r"[\s,.!]+)*")
_NO = r"(?:no|nope|nah|no no)[\s,.!—–-]+"
_DONT = r"(?:don'?t|do not)"
#: who did it, right before a past-tense verb: "I restarted …", "then restarted …", or nobody
#: ("Restarted nginx.")
_DOER = (r"(?:^|\b(?:i|we|you|i've|we've|i have|we have|i had|we had|i just|we just|just|then|"
         r"so|and|after|finally|also|i also|we also|i then|we then)\s+)")
#: what after "restarted" is not its object ("the server restarted unexpectedly")
_NOT_OBJECT = (r"(?!(?:itself|again|twice|unexpectedly|automatically|on\b|at\b|after\b|when\b|"
               r"because\b|by\b|for\b|since\b|every\b|while\b|during\b|in\b|it\b|fine\b|ok\b)"
               r")")
_TROUBLE = (r"(?:failed|fails|failing|crashed|crashes|crashing|broke|breaks|died|dies|hung|"
            r"hangs|froze|freezes|stopped|errored|errors|erroring|timed out|times out|went down|"
            r"(?:is|was|were|are) (?:slow|down|broken|failing|unreachable|stuck)|"
            r"wouldn'?t (?:start|boot|work|connect)|won'?t (?:start|boot|work|connect)|"
            r"couldn'?t (?:start|boot|connect)|didn'?t (?:start|boot|work|connect)|"
            r"exited|panicked|segfaulted|ran out of \w+|oom[- ]?killed|got killed|was killed|"
            r"was rejected|was refused)")

RULES: tuple[Rule, ...] = (
    # --- the user's refusals (before the approvals: "no, don't go ahead") ---------------------
    Rule("refusal.no", "approval", "denied", _re(
        rf"^{_LEAD}{_NO}(?:please\s+)?(?:never|{_DONT}|stop|not now|not yet|leave it|cancel|"
        rf"abort|absolutely not|not that|no way)\b"), _USER_ONLY,
        needs=("no", "nah")),
    Rule("refusal.dont_do_that", "approval", "denied", _re(
        rf"^{_LEAD}(?:please\s+)?{_DONT}\s+(?:ever\s+)?(?:do|try)\s+(?:that|it|this)\b"),
        _USER_ONLY,
        needs=("don", "do not")),
    Rule("refusal.do_not_touch", "approval", "denied", _re(
        rf"^{_LEAD}(?:please\s+)?(?:{_DONT}|never)\s+(?:ever\s+)?(?:touch|modify|change|edit)\s+\S"),
        _USER_ONLY,
        needs=("touch", "modify", "change", "edit")),
    Rule("refusal.stop", "approval", "denied", _re(
        rf"^{_LEAD}(?:please\s+)?stop(?:\s+(?:it|that|this|now|right now|right there|here|"
        rf"immediately|doing (?:that|this|it)))?[\s.!]*$"), _USER_ONLY,
        needs=("stop",)),
    Rule("refusal.not_approved", "approval", "denied", _re(
        r"^(?:denied|refused|rejected|not approved|cancel (?:that|it)|abort(?: that| it)?)[\s.!]*$"
        r"|\bi (?:do not|don'?t) (?:approve|agree to|want you to)\b|\bi (?:refuse|deny)\b"
        r"|\b(?:that'?s|that is|this is) not (?:approved|ok|okay|allowed)\b"), _USER_ONLY,
        needs=("denied", "refused", "rejected", "approv", "cancel", "abort", "agree to",
               "want you to", "refuse", "deny", "not ok", "not allowed")),
    # "Don't restart the database." (not "please don't …", "don't ever …", "don't use …":
    # stated preferences; not "don't worry")
    Rule("refusal.dont", "approval", "denied", _re(
        rf"^{_LEAD}{_DONT}\s+(?!(?:worry|bother|forget|know|think|mind|understand|see|care|"
        rf"need|have|get|want|remember|recall|like|feel|be|hesitate|panic|rush|ever|use|"
        rf"using)\b)[a-z]+\b"), _USER_ONLY,
        needs=("don", "do not")),
    # --- the user's approvals -------------------------------------------------------------------
    Rule("approval.go_ahead", "approval", "granted", _re(
        rf"^{_LEAD}(?:(?:yes|yeah|yep|yup|sure|fine|sounds good|that'?s fine|looks good|lgtm|"
        rf"perfect|great|do it)[\s,.!—–-]+)*(?:please\s+)?(?:go ahead|go for it|proceed|do it|"
        rf"ship it|approved|you may proceed|you can proceed|you can go ahead|you have my "
        rf"(?:approval|permission|ok)|permission granted)\b"
        r"|^(?:yes|yeah|yep)[\s,.!]+please\b"
        r"|\bi (?:approve|give (?:you )?(?:my |the )?(?:approval|permission|go-ahead))\b"),
        _USER_ONLY,
        needs=("go ahead", "go for it", "go-ahead", "proceed", "do it", "ship it", "approv",
               "permission", "ye", "my ok")),
    # --- the user's corrections ---------------------------------------------------------------
    Rule("correction.meant", "user_pattern", "correction", _re(
        rf"^{_LEAD}(?:(?:no|nope|sorry|oops|wait|ah)[\s,.!—–-]+)*i meant\b(?!\s+to\b)"
        r"|\bwhat i meant (?:is|was)\b"), _USER_ONLY,
        needs=("meant",)),
    Rule("correction.actually", "user_pattern", "correction", _re(
        r"^(?:(?:no|nope|oh|sorry|wait|hmm+|well|ah)[\s,.!—–-]+)*actually[\s,]+"
        r"(?!never ?mind\b|nvm\b)\S"
        r"|\b(?:it'?s|it is|that'?s|that is|the \w+ (?:is|was|are|were)) actually\b"), _USER_ONLY,
        needs=("actually",)),
    Rule("correction.explicit", "user_pattern", "correction", _re(
        r"^(?:correction|to clarify|to be clear|let me correct (?:that|myself)|i was wrong)"
        r"\s*[:,—–-]\s*\S"), _USER_ONLY,
        needs=("correction", "clarify", "to be clear", "correct", "i was wrong")),
    Rule("correction.no_its", "user_pattern", "correction", _re(
        rf"^{_NO}(?:it'?s|it is|it was|that'?s|that is|they'?re|they are|the \w+ (?:is|was|are|"
        rf"were)|my \w+ (?:is|was))\s+(?!(?:fine|ok|okay|alright|all right|good|great|nothing|"
        rf"correct|right|true|okay)\b)\S"), _USER_ONLY,
        needs=("no", "nah")),
    # --- the user's stated preferences -----------------------------------------------------------
    Rule("preference.prefer", "user_pattern", "preference", _re(
        r"\bi(?:'d| would)? (?:really |much |strongly |generally |usually |always |definitely |"
        r"still )?(?:prefer|rather)\b"
        r"|\bmy (?:preference|preferred \w+|favou?rite \w+|go-to \w+) (?:is|are)\b"), _USER_ONLY,
        needs=("prefer", "rather", "favo", "go-to")),
    Rule("preference.please_dont", "user_pattern", "preference", _re(
        rf"^please[\s,]+(?:{_DONT}|avoid|stop using|refrain from)\b"), _USER_ONLY,
        needs=("please",)),
    Rule("preference.always", "user_pattern", "preference", _re(
        r"^(?:please[\s,]+)?always\s+(?!(?:the|a|an|same|this|that|it|so|has|had|was|is|"
        r"were|been)\b)[a-z]+"
        r"|\b(?:you should|you must|make sure (?:to|you)|remember to|be sure to|please) always\b"
        r"|\bi always (?:use|want|prefer|run|work|keep|like|write|deploy|put)\b"), _USER_ONLY,
        needs=("always",)),
    Rule("preference.never", "user_pattern", "preference", _re(
        r"^(?:please[\s,]+)?never\s+(?!(?:mind|again|the|a|an|same|this|that|it|so|has|had|"
        r"was|is|were|been)\b)[a-z]+"
        rf"|^{_LEAD}{_DONT}\s+(?:ever\s+[a-z]+|use\b|using\b)"
        r"|\b(?:you should|you must|make sure (?:to|you)|remember to|be sure to|please) never\b"
        r"|\bi never (?:use|want|run|work|keep|like|write|deploy|put)\b"), _USER_ONLY,
        needs=("never", "don", "do not")),
    Rule("preference.from_now_on", "user_pattern", "preference", _re(
        r"\b(?:from now on|going forward|from here on(?: out)?|in (?:the )?future|"
        r"for future reference)\b"), _USER_ONLY,
        needs=("from now on", "going forward", "from here on", "future")),
    Rule("preference.use_instead", "user_pattern", "preference", _re(
        r"^(?:please[\s,]+)?(?:use|stick (?:to|with)|switch to|go with)\s+\S+(?:\s+\S+){0,5}?\s+"
        r"(?:instead of|rather than)\b"), _USER_ONLY,
        needs=("instead of", "rather than")),
    # --- fixes applied (anyone) ---------------------------------------------------------------------
    Rule("fix.fixed_by", "diagnosis", "resolution", _re(
        r"\b(?:fixed|solved|resolved|repaired|sorted)(?: it| this| that| the (?:[\w.-]+ ){0,3}?"
        r"(?:issue|problem|error|bug|crash|outage|failure|build))?\s+(?:by|with)\b"
        r"|\b(?:that|this|which|what) (?:fixed|solved|resolved) (?:it|the (?:\w+ ){0,2}?"
        r"(?:issue|problem|error|bug|crash|outage))\b"
        r"|\bwhat (?:fixed|solved|resolved) it (?:was|is)\b"), _ANYONE, negatable=True,
        needs=("fixed", "solved", "resolved", "repaired", "sorted")),
    Rule("fix.the_fix", "diagnosis", "resolution", _re(
        r"\bthe (?:fix|solution|workaround|remedy|resolution) (?:was|is|turned out to be)\b"
        r"(?!\s+(?:not|unclear|unknown|still)\b)"
        r"|^(?:fix|fixed|solution|workaround|resolution)\s*:\s*\S"), _ANYONE, negatable=True,
        hedgeable=True,
        needs=("fix", "solution", "workaround", "remedy", "resolution")),
    Rule("fix.restarted", "diagnosis", "resolution", _re(
        rf"{_DOER}(?:re-?started|rebooted|reloaded|relaunched|power-cycled|bounced)\s+{_NOT_OBJECT}"
        r"(?:the\s+)?[\w`.@/-]"
        r"|\b(?:was|were|has been|have been|got)\s+(?:re-?started|rebooted|reloaded)\b"
        r"(?!\s+(?:unexpectedly|automatically|by (?:itself|systemd|the kernel)))"),
        _ANYONE, negatable=True, hedgeable=True,
        needs=("restart", "re-start", "reboot", "reload", "relaunch", "power-cycled", "bounced")),
    Rule("fix.rolled_back", "diagnosis", "resolution", _re(
        rf"{_DOER}(?:rolled back|reverted|downgraded|undid)\s+\S"
        r"|\b(?:was|were|has been|have been|got)\s+(?:rolled back|reverted|downgraded)\b"),
        _ANYONE, negatable=True, hedgeable=True,
        needs=("rolled back", "reverted", "downgraded", "undid")),
    Rule("fix.applied", "diagnosis", "resolution", _re(
        rf"{_DOER}(?:applied|re-?applied|patched|reinstalled)\s+(?!for\b|to\b)\S"
        r"|\b(?:was|were|has been|have been|got)\s+(?:applied|patched|reinstalled)\b"
        # "lowered the MTU to 1380", "set vm.swappiness to 10": a setting changed to a value
        rf"|{_DOER}(?:lowered|raised|increased|decreased|reduced|bumped|set|changed)\s+"
        r"(?:the\s+|its\s+|my\s+)?[\w.`/-]+(?:\s+[\w.`/-]+){0,3}?\s+(?:from\s+\S+\s+)?to\s+"
        r"(?:[\d`\"']|(?:true|false|on|off|debug|info|warn|the default)\b)"),
        _ANYONE, negatable=True, hedgeable=True,
        needs=("applied", "reapplied", "patched", "reinstalled", "lowered", "raised", "increased",
               "decreased", "reduced", "bumped", "set", "changed")),
    Rule("fix.ran", "diagnosis", "resolution", _re(
        r"\b(?:ran|executed|re-?ran)\s+(?:the\s+command\s+|a\s+quick\s+)?`[^`]+`"),
        _ANYONE, negatable=True, hedgeable=True,
        needs=("`",)),
    # --- diagnoses (anyone) -----------------------------------------------------------------------
    Rule("diagnosis.root_cause", "diagnosis", "root_cause", _re(
        r"\broot[ -]cause\s*(?::|—|–|-|(?:was|is|turned out to be)\b)\s*(?!not\b|unclear\b|"
        r"unknown\b|still\b)\S"
        r"|^(?:diagnosis|cause|conclusion|verdict|finding)\s*:\s*\S"), _ANYONE,
        negatable=True, hedgeable=True,
        needs=("root", "diagnosis", "cause", "conclusion", "verdict", "finding")),
    Rule("diagnosis.cause", "diagnosis", "root_cause", _re(
        r"\bthe (?:real |actual |underlying |main )?(?:cause|reason)(?: of [^,.;]{1,60}?"
        r"| for [^,.;]{1,60}?| here)? (?:was|is|turned out to be)\b"
        r"(?!\s+(?:not|unclear|unknown|still|a mystery)\b)"
        r"|\b(?:was|were|is|are|been|got)\s+caused by\b"), _ANYONE, negatable=True,
        hedgeable=True,
        needs=("cause", "reason")),
    Rule("diagnosis.because", "diagnosis", "root_cause", _re(
        rf"\b{_TROUBLE}\b[^.;!?]{{0,60}}?\b(?:because|due to|as a result of)\b"), _ANYONE,
        negatable=True, hedgeable=True,
        needs=("because", "due to", "as a result of")),
    Rule("diagnosis.turned_out", "diagnosis", "root_cause", _re(
        r"\bturn(?:ed|s) out\b(?!\s+(?:to be\s+)?(?:fine|great|well|ok|okay|good|nice|alright|"
        r"all right|nothing|not)\b)[\s,]+(?:that\s+|to be\s+)?\S"), _ANYONE, negatable=True,
        hedgeable=True,
        needs=("turned out", "turns out")),
    Rule("diagnosis.problem_is", "diagnosis", "root_cause", _re(
        r"\bthe (?:problem|issue|culprit|bug|trouble)(?: here| was that| is that)? "
        r"(?:is|was|turned out to be)\b(?!\s+(?:not|fixed|solved|resolved|gone|still|back|now|"
        r"unclear|unknown|that i don'?t)\b)[\s:]+\S"), _ANYONE, negatable=True, hedgeable=True,
        needs=("problem", "issue", "culprit", "bug", "trouble")),
)

#: Every rule's words in one search: a sentence is tried only against the rules whose words it
#: holds (one scan of the sentence instead of a search per rule). A word found stands for the
#: shorter words inside it too ("fixed" holds "fix").
#: The words begin a word in every match ("approv" in "approved"), so the search tries word
#: starts only; a backtick is looked for apart.
_WORDS = sorted({w for r in RULES for w in r.needs if w != "`"}, key=len, reverse=True)


def _trie(words: Sequence[str]) -> str:
    """A regular expression matching the longest of `words` at a place, their common prefixes
    factored out (the regex engine tries a trie's first letters at once, not every word)."""
    if "" in words and len(words) == 1:
        return ""
    heads: dict[str, list[str]] = {}
    for w in words:
        if w:
            heads.setdefault(w[0], []).append(w[1:])
    branches = [re.escape(h) + _trie(rest) for h, rest in sorted(heads.items())]
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    return f"(?:{body})?" if "" in words else body


_TRIGGERS = re.compile(r"\b" + _trie(_WORDS))
_HOLDS = {w: frozenset(x for x in _WORDS if w.startswith(x)) for w in _WORDS}
assert all(r.needs for r in RULES), "every rule names the words its matches hold"


def _candidates(lowered: str, rules: Sequence[Rule]) -> list[Rule]:
    """The rules whose words `lowered` holds."""
    found: set[str] = {"`"} if "`" in lowered else set()
    for w in _TRIGGERS.findall(lowered):
        found |= _HOLDS[w]
    return [r for r in rules if not found.isdisjoint(r.needs)] if found else []


# --- what cancels a match -------------------------------------------------------------------
_QUESTION_START = _re(
    r"^(?:should|shall|could|can|would|will|do|does|did|is|are|was|were|may|might|have|has|"
    r"had|must)\s+(?:i|we|you|it|they|he|she|this|that|there|the|my|our)\b"
    r"|^(?:what if|how about|i wonder|wondering|any idea|do you know|is it possible|"
    r"whether)\b")
_CONDITION = _re(r"^(?:if|unless|in case|suppose|supposing|assuming|when|once|whenever|"
                 r"let'?s say|imagine)\b")
_HEDGE = _re(r"\b(?:maybe|perhaps|possibly|probably|presumably|might|may be|may have|could be|"
             r"could have|not sure|unsure|i wonder|i suspect|i guess|guessing|hypothes\w+|"
             r"seems? (?:to be|like)|if|whether|unless|would|hopefully|likely|unclear)\b")
_NEGATION = _re(r"\b(?:not|never|no|nobody|neither|nor|without|cannot|haven'?t|hasn'?t|didn'?t|"
                r"don'?t|doesn'?t|wasn'?t|weren'?t|isn'?t|aren'?t|won'?t|wouldn'?t|couldn'?t|"
                r"can'?t|shouldn'?t|failed to|unable to|tried to|try to|trying to)\b")
_COUNTERFACTUAL = _re(r"\b(?:should|could|would|might|must|may)(?:n'?t| not)? have\s*$"
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
    if not _candidates(hidden.lower(), usable):  # most turns: none of the rules' words at all
        return []
    out: list[Conclusion] = []
    for start, end in sentences(hidden):
        if end - start > MAX_SENTENCE_CHARS:
            continue
        seen = hidden[start:end]
        if not seen.strip(" x`\"“”«»") or _question(seen):
            continue
        for rule in _candidates(seen.lower(), usable):
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


def turn_text(event: MemoryEvent) -> str:
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


# --- questions about what was concluded ----------------------------------------------------------
# Not a bare "why did …": most such questions are about the machine ("why did backup.service
# fail?"), answered by its events; a conversation's diagnosis would be lifted over them for no
# reason but its category (the workstation set's why-failed kind: Hit@5 1.0 → 0.33).
_ASKS_DIAGNOSIS = _re(r"\b(?:diagnos\w*|root[ -]cause|caus(?:e|ed|es|ing)|culprit|what went wrong|"
                      r"what was wrong|fix(?:ed|es)?|solution|solved|"
                      r"resolved?|workaround)\b")
_ASKS_PREFERENCE = _re(r"\b(?:prefer\w*|preference|favou?rite|likes? to|wants? me to|"
                       r"how (?:do|does) (?:i|the user) (?:like|want)|my (?:rules?|defaults?)|"
                       r"correct(?:ed|ion))\b")
_ASKS_APPROVAL = _re(r"\b(?:approv\w*|refus\w*|go[- ]ahead|allowed|said (?:yes|no)|agreed)\b")
_ASKS_CONCLUSION = _re(r"\b(?:conclu\w*|decid\w*|decision|settle[ds]?|outcome|takeaways?)\b")


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
        found.add("user_pattern")
    if _ASKS_APPROVAL.search(query):
        found.add("approval")
    return frozenset(found)


def asked_first(ranked: Sequence[Candidate], query: str) -> list[Candidate]:
    """`ranked` with the memories of the kind of conclusion the question asks for first (each
    lifted by the best score, component `conclusion`: rank-lexicographic, as a named identifier
    or host is), in their fused order; unchanged when it asks for none or none is there."""
    cands = list(ranked)
    cats = asked_categories(query)
    if not cats or not any(c.category in cats for c in cands):
        return cands
    return lift_by_best(cands, lambda c: 1 if c.category in cats else 0, "conclusion")


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
