"""Query classification: decides whether and what to recall before anything is searched."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class QueryClass(StrEnum):
    GREETING = "greeting"  # small talk / meta: no memories
    DIAGNOSTIC = "diagnostic"  # "why is X slow": recent system events first
    CONTINUATION = "continuation"  # "go on", "as I said": the recent session
    TASK = "task"  # everything else: preferences, past actions, facts


_GREETING = re.compile(
    r"^\s*(?:hi|hello|hey|yo|hiya|howdy|thanks|thank you|thx|ty|ok|okay|k|cool|nice|great|"
    r"good (?:morning|afternoon|evening|night)|bye|goodbye|see you|cheers|lol|yes|no|sure|"
    r"yep|nope|got it|sounds good|who are you|what can you do|help)"
    r"(?:\s+(?:there|again|so much|a lot|mate|buddy|man))?[\s!.?,:;)(*-]*$",
    re.I,
)
# Trouble on the machine, named outright: diagnostic whatever else the question says.
_TROUBLE = re.compile(
    r"\b(?:slow(?:er|s|ed|ing)?(?! cook)|sluggish|lag(?:s|gy|ging)|freez\w*|froze|hang(?:s|ing)?|"
    r"crash\w*|fail\w*|error\w*|broken|break(?:s|ing)|panic\w*|segfault\w*|outage|oom|"
    r"out of (?:memory|space|disk)|high (?:cpu|memory|load)|overheat\w*|warnings?|"
    r"timed? ?out|timeouts?|unreachable|refused|denied|problems?|flicker\w*|"
    r"disconnect(?:s|ed|ing)|reboot(?:s|ing)|restart loop|crash loop|"
    r"(?:\ba|get|got|getting|returns?|returning|http|status) 50[0234]|"
    r"keeps? (?:restarting|rebooting|dropping|disconnecting|crashing|freezing|failing)|"
    r"not (?:working|starting|responding|loading|running|booting|connecting)|"
    r"(?:is|are|almost|nearly) full|(?:running|too|so|very) hot)\b"
    # "why won't my bluetooth connect", "can't ssh into the server"
    r"|\b(?:won'?t|can'?t|cannot|couldn'?t|unable to)(?:\s+\S+){0,3}?\s+(?:start|boot|load|"
    r"open|run|work|connect|reach|access|mount|install|update|upgrade|resolve|log ?in|login|"
    r"ssh|ping|print|compile|build|sync|download|upload|play)\b"
    # "why is my nginx down", not "shut down" / "upside-down"
    r"|\b(?:is|are|was|were|went|goes|going)\b[^.?!]{0,40}?\bdown\b",
    re.I,
)
# The machine's parts: diagnostic when asked why, or about their state now ("what's using my
# CPU"), but not when the user recalls something they did ("how much RAM did I upgrade to").
_MACHINE = re.compile(
    r"\b(?:cpu|gpu|ram|swap|disk|drive|storage|battery|wifi|wi-fi|network|dns|internet|vpn|ip|"
    r"bluetooth|usb|printer|screen|display|audio|sound|microphone|mic|webcam|camera|firewall|"
    r"docker|containers?|connection|service|daemon|laptop|computer|machine|pc|system|"
    r"workstation|systemd|journal|logs?|kernel|processes|load|temperature|"
    r"(?:the|cpu|gpu|case|laptop) fans?|port|server|"
    r"memory (?:usage|use|leak|pressure|consumption)|"
    r"(?:using|eating|hogging|consuming|uses|use|free|low on|much) (?:\w+ ){0,2}memory)\b",
    re.I,
)
_WHY = re.compile(r"\bwhy\b", re.I)
_PRESENT = re.compile(
    r"\b(?:is|are|isn'?t|aren'?t|doesn'?t|don'?t|keeps?|now|currently|today|check|show|"
    r"status|usage|running|left|free|available|"
    r"(?:what|that|it|there|who|where|how|he|she)'s|(?:they|we|you)'re)\b",
    re.I,
)
_OWN_PAST = re.compile(
    r"\b(?:did|had|was) i\b|\bhave i (?:been|ever|\w+ed)\b|\bi(?:'ve| had| used)\b|"
    r"\bi have (?:been|\w+ed)\b", re.I)


def _diagnostic(query: str) -> bool:
    if _TROUBLE.search(query):
        return True
    if not _MACHINE.search(query):
        return False
    return not _OWN_PAST.search(query) and bool(_WHY.search(query) or _PRESENT.search(query))


_CONTINUATION = re.compile(
    r"^\s*(?:continue|go on|keep going|and then|as i (?:said|mentioned)|where were we|"
    r"what were we (?:doing|talking about)|back to (?:that|it)|same as before|again)\b",
    re.I,
)


@dataclass(frozen=True)
class Classification:
    kind: QueryClass
    max_results: int


def classify(query: str, requested: int) -> Classification:
    """Classify `query` and size the answer (0 for greetings, else what was asked)."""
    if requested <= 0:
        return Classification(QueryClass.TASK, 0)
    if _GREETING.match(query):
        return Classification(QueryClass.GREETING, 0)
    if _CONTINUATION.match(query):
        return Classification(QueryClass.CONTINUATION, requested)
    if _diagnostic(query):
        return Classification(QueryClass.DIAGNOSTIC, requested)
    return Classification(QueryClass.TASK, requested)
