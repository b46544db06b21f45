"""An exact identifier in the question ranks its memories first.

Operators ask by identifiers: "what happened to blk_-5623176793330377570?", "which user tried
from 183.62.140.253?", "is partition rdd_42_18 found?". A memory that carries the identifier
verbatim answers; one that merely reads alike (another block's line, embedded almost the same)
does not, however close its vector. So the memories naming more of the question's identifiers
come first, in their fused order, then the rest: a rank-lexicographic rule, not a weight to tune.

Only telling identifiers count: a token with a digit and something else (a letter, `. _ : / @ -`),
or a number of five digits or more. Years, small counts, ordinals and clock times ("2023", "3",
"3rd", "10am", "8:30") are words of a question, not identifiers, unless the question says what
kind of number it is: "process 1130", "pid 812", "port 22" name a process and a port.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .fusion import Candidate, lift_by_best
from .repeats import identifiers

_WEAK = re.compile(r"^(?:\d{1,4}|\d+[a-z]{1,3}|\d{1,2}:\d{2}(?::\d{2})?(?:am|pm)?)$")


#: Words that make the number after them an identifier ("process 1130", "port 22").
_KIND = re.compile(r"\b(?:process|pid|ppid|port|uid|gid)\s*[:#=]?\s*(\d+)\b", re.IGNORECASE)


def named_identifiers(query: str) -> frozenset[str]:
    """The telling identifiers a question names."""
    kinded = {m.group(1) for m in _KIND.finditer(query)}
    return frozenset(t for t in identifiers(query) if t in kinded or not _WEAK.match(t))


def named_first(ranked: Iterable[Candidate], query: str) -> list[Candidate]:
    """`ranked` with the memories naming the most of the question's identifiers first (each
    lifted by the best score times the number it names, component `named`), sorted."""
    cands = list(ranked)
    named = named_identifiers(query)
    if not named or not cands:
        return cands
    return lift_by_best(cands, lambda c: len(named & identifiers(c.text)), "named")
