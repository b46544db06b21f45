"""The rules by which core/conclusions.py reads what a conversation turn concluded: each rule's
pattern, the category it makes, whose words it reads, what cancels it, and the words a sentence
must hold to be tried against it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

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


def rx(pattern: str) -> re.Pattern[str]:
    """A case-insensitive regular expression (every rule and cancel is one)."""
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
    Rule("refusal.no", "approval", "denied", rx(
        rf"^{_LEAD}{_NO}(?:please\s+)?(?:never|{_DONT}|stop|not now|not yet|leave it|cancel|"
        rf"abort|absolutely not|not that|no way)\b"), _USER_ONLY,
        needs=("no", "nah")),
    Rule("refusal.dont_do_that", "approval", "denied", rx(
        rf"^{_LEAD}(?:please\s+)?{_DONT}\s+(?:ever\s+)?(?:do|try)\s+(?:that|it|this)\b"),
        _USER_ONLY,
        needs=("don", "do not")),
    Rule("refusal.do_not_touch", "approval", "denied", rx(
        rf"^{_LEAD}(?:please\s+)?(?:{_DONT}|never)\s+(?:ever\s+)?(?:touch|modify|change|edit)\s+\S"),
        _USER_ONLY,
        needs=("touch", "modify", "change", "edit")),
    Rule("refusal.stop", "approval", "denied", rx(
        rf"^{_LEAD}(?:please\s+)?stop(?:\s+(?:it|that|this|now|right now|right there|here|"
        rf"immediately|doing (?:that|this|it)))?[\s.!]*$"), _USER_ONLY,
        needs=("stop",)),
    Rule("refusal.not_approved", "approval", "denied", rx(
        r"^(?:denied|refused|rejected|not approved|cancel (?:that|it)|abort(?: that| it)?)[\s.!]*$"
        r"|\bi (?:do not|don'?t) (?:approve|agree to|want you to)\b|\bi (?:refuse|deny)\b"
        r"|\b(?:that'?s|that is|this is) not (?:approved|ok|okay|allowed)\b"), _USER_ONLY,
        needs=("denied", "refused", "rejected", "approv", "cancel", "abort", "agree to",
               "want you to", "refuse", "deny", "not ok", "not allowed")),
    # "Don't restart the database." (not "please don't …", "don't ever …", "don't use …":
    # stated preferences; not "don't worry")
    Rule("refusal.dont", "approval", "denied", rx(
        rf"^{_LEAD}{_DONT}\s+(?!(?:worry|bother|forget|know|think|mind|understand|see|care|"
        rf"need|have|get|want|remember|recall|like|feel|be|hesitate|panic|rush|ever|use|"
        rf"using)\b)[a-z]+\b"), _USER_ONLY,
        needs=("don", "do not")),
    # --- the user's approvals -------------------------------------------------------------------
    Rule("approval.go_ahead", "approval", "granted", rx(
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
    Rule("correction.meant", "user_pattern", "correction", rx(
        rf"^{_LEAD}(?:(?:no|nope|sorry|oops|wait|ah)[\s,.!—–-]+)*i meant\b(?!\s+to\b)"
        r"|\bwhat i meant (?:is|was)\b"), _USER_ONLY,
        needs=("meant",)),
    Rule("correction.actually", "user_pattern", "correction", rx(
        r"^(?:(?:no|nope|oh|sorry|wait|hmm+|well|ah)[\s,.!—–-]+)*actually[\s,]+"
        r"(?!never ?mind\b|nvm\b)\S"
        r"|\b(?:it'?s|it is|that'?s|that is|the \w+ (?:is|was|are|were)) actually\b"), _USER_ONLY,
        needs=("actually",)),
    Rule("correction.explicit", "user_pattern", "correction", rx(
        r"^(?:correction|to clarify|to be clear|let me correct (?:that|myself)|i was wrong)"
        r"\s*[:,—–-]\s*\S"), _USER_ONLY,
        needs=("correction", "clarify", "to be clear", "correct", "i was wrong")),
    Rule("correction.no_its", "user_pattern", "correction", rx(
        rf"^{_NO}(?:it'?s|it is|it was|that'?s|that is|they'?re|they are|the \w+ (?:is|was|are|"
        rf"were)|my \w+ (?:is|was))\s+(?!(?:fine|ok|okay|alright|all right|good|great|nothing|"
        rf"correct|right|true|okay)\b)\S"), _USER_ONLY,
        needs=("no", "nah")),
    # --- the user's stated preferences -----------------------------------------------------------
    Rule("preference.prefer", "user_pattern", "preference", rx(
        r"\bi(?:'d| would)? (?:really |much |strongly |generally |usually |always |definitely |"
        r"still )?(?:prefer|rather)\b"
        r"|\bmy (?:preference|preferred \w+|favou?rite \w+|go-to \w+) (?:is|are)\b"), _USER_ONLY,
        needs=("prefer", "rather", "favo", "go-to")),
    Rule("preference.please_dont", "user_pattern", "preference", rx(
        rf"^please[\s,]+(?:{_DONT}|avoid|stop using|refrain from)\b"), _USER_ONLY,
        needs=("please",)),
    Rule("preference.always", "user_pattern", "preference", rx(
        r"^(?:please[\s,]+)?always\s+(?!(?:the|a|an|same|this|that|it|so|has|had|was|is|"
        r"were|been)\b)[a-z]+"
        r"|\b(?:you should|you must|make sure (?:to|you)|remember to|be sure to|please) always\b"
        r"|\bi always (?:use|want|prefer|run|work|keep|like|write|deploy|put)\b"), _USER_ONLY,
        needs=("always",)),
    Rule("preference.never", "user_pattern", "preference", rx(
        r"^(?:please[\s,]+)?never\s+(?!(?:mind|again|the|a|an|same|this|that|it|so|has|had|"
        r"was|is|were|been)\b)[a-z]+"
        rf"|^{_LEAD}{_DONT}\s+(?:ever\s+[a-z]+|use\b|using\b)"
        r"|\b(?:you should|you must|make sure (?:to|you)|remember to|be sure to|please) never\b"
        r"|\bi never (?:use|want|run|work|keep|like|write|deploy|put)\b"), _USER_ONLY,
        needs=("never", "don", "do not")),
    Rule("preference.from_now_on", "user_pattern", "preference", rx(
        r"\b(?:from now on|going forward|from here on(?: out)?|in (?:the )?future|"
        r"for future reference)\b"), _USER_ONLY,
        needs=("from now on", "going forward", "from here on", "future")),
    Rule("preference.use_instead", "user_pattern", "preference", rx(
        r"^(?:please[\s,]+)?(?:use|stick (?:to|with)|switch to|go with)\s+\S+(?:\s+\S+){0,5}?\s+"
        r"(?:instead of|rather than)\b"), _USER_ONLY,
        needs=("instead of", "rather than")),
    # --- fixes applied (anyone) ---------------------------------------------------------------------
    Rule("fix.fixed_by", "diagnosis", "resolution", rx(
        r"\b(?:fixed|solved|resolved|repaired|sorted)(?: it| this| that| the (?:[\w.-]+ ){0,3}?"
        r"(?:issue|problem|error|bug|crash|outage|failure|build))?\s+(?:by|with)\b"
        r"|\b(?:that|this|which|what) (?:fixed|solved|resolved) (?:it|the (?:\w+ ){0,2}?"
        r"(?:issue|problem|error|bug|crash|outage))\b"
        r"|\bwhat (?:fixed|solved|resolved) it (?:was|is)\b"), _ANYONE, negatable=True,
        needs=("fixed", "solved", "resolved", "repaired", "sorted")),
    Rule("fix.the_fix", "diagnosis", "resolution", rx(
        r"\bthe (?:fix|solution|workaround|remedy|resolution) (?:was|is|turned out to be)\b"
        r"(?!\s+(?:not|unclear|unknown|still)\b)"
        r"|^(?:fix|fixed|solution|workaround|resolution)\s*:\s*\S"), _ANYONE, negatable=True,
        hedgeable=True,
        needs=("fix", "solution", "workaround", "remedy", "resolution")),
    Rule("fix.restarted", "diagnosis", "resolution", rx(
        rf"{_DOER}(?:re-?started|rebooted|reloaded|relaunched|power-cycled|bounced)\s+{_NOT_OBJECT}"
        r"(?:the\s+)?[\w`.@/-]"
        r"|\b(?:was|were|has been|have been|got)\s+(?:re-?started|rebooted|reloaded)\b"
        r"(?!\s+(?:unexpectedly|automatically|by (?:itself|systemd|the kernel)))"),
        _ANYONE, negatable=True, hedgeable=True,
        needs=("restart", "re-start", "reboot", "reload", "relaunch", "power-cycled", "bounced")),
    Rule("fix.rolled_back", "diagnosis", "resolution", rx(
        rf"{_DOER}(?:rolled back|reverted|downgraded|undid)\s+\S"
        r"|\b(?:was|were|has been|have been|got)\s+(?:rolled back|reverted|downgraded)\b"),
        _ANYONE, negatable=True, hedgeable=True,
        needs=("rolled back", "reverted", "downgraded", "undid")),
    Rule("fix.applied", "diagnosis", "resolution", rx(
        rf"{_DOER}(?:applied|re-?applied|patched|reinstalled)\s+(?!for\b|to\b)\S"
        r"|\b(?:was|were|has been|have been|got)\s+(?:applied|patched|reinstalled)\b"
        # "lowered the MTU to 1380", "set vm.swappiness to 10": a setting changed to a value
        rf"|{_DOER}(?:lowered|raised|increased|decreased|reduced|bumped|set|changed)\s+"
        r"(?:the\s+|its\s+|my\s+)?[\w.`/-]+(?:\s+[\w.`/-]+){0,3}?\s+(?:from\s+\S+\s+)?to\s+"
        r"(?:[\d`\"']|(?:true|false|on|off|debug|info|warn|the default)\b)"),
        _ANYONE, negatable=True, hedgeable=True,
        needs=("applied", "reapplied", "patched", "reinstalled", "lowered", "raised", "increased",
               "decreased", "reduced", "bumped", "set", "changed")),
    Rule("fix.ran", "diagnosis", "resolution", rx(
        r"\b(?:ran|executed|re-?ran)\s+(?:the\s+command\s+|a\s+quick\s+)?`[^`]+`"),
        _ANYONE, negatable=True, hedgeable=True,
        needs=("`",)),
    # --- diagnoses (anyone) -----------------------------------------------------------------------
    Rule("diagnosis.root_cause", "diagnosis", "root_cause", rx(
        r"\broot[ -]cause\s*(?::|—|–|-|(?:was|is|turned out to be)\b)\s*(?!not\b|unclear\b|"
        r"unknown\b|still\b)\S"
        r"|^(?:diagnosis|cause|conclusion|verdict|finding)\s*:\s*\S"), _ANYONE,
        negatable=True, hedgeable=True,
        needs=("root", "diagnosis", "cause", "conclusion", "verdict", "finding")),
    Rule("diagnosis.cause", "diagnosis", "root_cause", rx(
        r"\bthe (?:real |actual |underlying |main )?(?:cause|reason)(?: of [^,.;]{1,60}?"
        r"| for [^,.;]{1,60}?| here)? (?:was|is|turned out to be)\b"
        r"(?!\s+(?:not|unclear|unknown|still|a mystery)\b)"
        r"|\b(?:was|were|is|are|been|got)\s+caused by\b"), _ANYONE, negatable=True,
        hedgeable=True,
        needs=("cause", "reason")),
    Rule("diagnosis.because", "diagnosis", "root_cause", rx(
        rf"\b{_TROUBLE}\b[^.;!?]{{0,60}}?\b(?:because|due to|as a result of)\b"), _ANYONE,
        negatable=True, hedgeable=True,
        needs=("because", "due to", "as a result of")),
    Rule("diagnosis.turned_out", "diagnosis", "root_cause", rx(
        r"\bturn(?:ed|s) out\b(?!\s+(?:to be\s+)?(?:fine|great|well|ok|okay|good|nice|alright|"
        r"all right|nothing|not)\b)[\s,]+(?:that\s+|to be\s+)?\S"), _ANYONE, negatable=True,
        hedgeable=True,
        needs=("turned out", "turns out")),
    Rule("diagnosis.problem_is", "diagnosis", "root_cause", rx(
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


def candidates(lowered: str, rules: Sequence[Rule]) -> list[Rule]:
    """The rules whose words `lowered` holds."""
    found: set[str] = {"`"} if "`" in lowered else set()
    for w in _TRIGGERS.findall(lowered):
        found |= _HOLDS[w]
    return [r for r in rules if not found.isdisjoint(r.needs)] if found else []
