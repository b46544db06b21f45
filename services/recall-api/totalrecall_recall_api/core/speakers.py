"""A question embedded without the names of the people its conversations are between.

"What did Caroline research?" asks who (Caroline) and what (research). Who said a turn is a
field of the memory, and recall already lifts the turns of the speakers a question names
(`fusion.actor_boosts`). Left in the text that is embedded, the name pulls the question's
vector towards every turn that holds it, most of all the short ones where it is nearly all there
is ("Hey Caroline!", "Thanks, Caroline!", said by the other speaker), and away from the turn
that says what was asked. So the vector search is asked what, and the actor field who.

Only the speakers of conversation memories count, never the generic actors (user, assistant,
system): the machine's memories keep every word, and a conversation between a user and an
assistant is unchanged. The keyword search still sees the whole question.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection

from .fusion import GENERIC_ACTORS
from .text import STOPWORDS

#: Words a question keeps at least, else it is embedded as asked ("Caroline?" stays itself).
MIN_WORDS_LEFT = 2
_WORD = re.compile(r"\w+")


def speaker_names(actors: Collection[str]) -> frozenset[str]:
    """The names among a namespace's conversation actors: lower case, not a generic actor."""
    return frozenset(a.strip().lower() for a in actors
                     if a and a.strip() and a.strip().lower() not in GENERIC_ACTORS)


@functools.lru_cache(maxsize=256)
def _names_pattern(names: frozenset[str]) -> re.Pattern[str] | None:
    """The names, each a whole word with its possessive, longest first; made once per set of
    names (a namespace's speakers change rarely, its questions on every recall)."""
    if not names:
        return None
    # A name that is also a common word ("Will", "May") is a name only as written with a
    # capital: "what will Caroline do?" keeps its "will".
    alts = [re.escape(n) if n not in STOPWORDS else "(?-i:" + re.escape(n.capitalize()) + ")"
            for n in sorted(names, key=len, reverse=True)]
    return re.compile(r"(?<!\w)(?:" + "|".join(alts) + r")(?:['’]s)?(?!\w)", re.IGNORECASE)


def without_speakers(query: str, speakers: Collection[str]) -> str:
    """`query` with each speaker's name (whole word, and its possessive) left out; `query`
    itself when it names none, or when fewer than `MIN_WORDS_LEFT` words would be left."""
    pattern = _names_pattern(frozenset(n for n in speakers if n))
    if pattern is None:
        return query
    left, n = pattern.subn(" ", query)
    if n == 0:
        return query
    left = re.sub(r"\s+([,.;:?!])", r"\1", re.sub(r"\s+", " ", left)).strip()
    return left if len(_WORD.findall(left)) >= MIN_WORDS_LEFT else query
