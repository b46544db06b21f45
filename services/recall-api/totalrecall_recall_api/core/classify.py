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
_DIAGNOSTIC = re.compile(
    r"\b(?:slow|sluggish|lag\w*|freez\w*|hang\w*|crash\w*|fail\w*|error\w*|broken|break\w*|"
    r"won'?t|can'?t|cannot|not (?:working|starting|responding|loading)|down|outage|oom|"
    r"high (?:cpu|memory|load)|cpu|memory|ram|swap|disk|space|full|overheat\w*|battery|"
    r"wifi|network|dns|internet|connection|service|daemon|journal|log|warning|"
    r"why (?:is|did|does|are))\b",
    re.I,
)
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
    if _DIAGNOSTIC.search(query):
        return Classification(QueryClass.DIAGNOSTIC, requested)
    return Classification(QueryClass.TASK, requested)
