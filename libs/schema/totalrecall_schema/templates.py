"""Two forms of an event's text, used wherever repeats are recognised.

- The *exact form* replaces only what is truly volatile (date-times, dates, clock times) and
  collapses white space. Two events with the same exact form differ in nothing an operator asks
  about: they may be folded into one memory seen N times.
- The *template form* also replaces every number, hex word, IP, UUID and id, so "PacketResponder
  1 for block blk_1 terminating" and the same line for another block share it. Events with the
  same template are *not* the same event (the block ids tell them apart): they may share one
  embedding (computing it again would give almost the same vector), and recall orders them
  newest first, but each is kept with its own text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

_TIMESTAMPS: list[tuple[re.Pattern[str], str]] = [
    # ISO-8601 / RFC-3339 date-times and dates, with fractions and zones
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[tT ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
                r"(?:[zZ]|[+-]\d{2}:?\d{2})?)?\b"), "<ts>"),
    # clock times, with fractions
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?\b"), "<time>"),
]

#: Each pattern with what a text must hold for it to match (checked first: a scan for one
#: character costs a fraction of a pattern's, and most text, prose above all, holds no
#: timestamp, UUID or hex word; recall computes this form for many of the memories it ranks).
_DIGIT = re.compile(r"\d")  # Unicode digits, as `\d` in the patterns matches


def _has_dash_digit(text: str) -> bool:
    return "-" in text and _DIGIT.search(text) is not None


def _has_colon_digit(text: str) -> bool:
    return ":" in text and _DIGIT.search(text) is not None


def _has_digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


_IDENTIFIERS: list[tuple[re.Pattern[str], str, Callable[[str], bool]]] = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>",
     lambda t: "-" in t),
    (*_TIMESTAMPS[0], _has_dash_digit),
    (*_TIMESTAMPS[1], _has_colon_digit),
    # hex: 0x…, and hex words of ≥7 characters containing a digit (hashes, addresses, ids)
    (re.compile(r"\b0x[0-9a-f]+\b"), "<hex>", lambda t: "0x" in t),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"), "<hex>", _has_digit),
    # any remaining number: PIDs, ports, sizes, percentages, counters, IPs, block ids
    (re.compile(r"-?\d+(?:[.,]\d+)*"), "<n>", _has_digit),
]


def exact_form(text: str) -> str:
    """`text` with date-times and clock times replaced and white space collapsed (case kept)."""
    out = text
    for pattern, repl in _TIMESTAMPS:
        out = pattern.sub(repl, out)
    return " ".join(out.split())


def template_form(text: str) -> str:
    """Lower-case `text` with numbers, hex, UUIDs, IPs, ids and timestamps replaced."""
    out = text.lower()
    for pattern, repl, may_match in _IDENTIFIERS:
        if may_match(out):
            out = pattern.sub(repl, out)
    # split() and strip() take the white space `\s` does (str.isspace), without a regex pass
    return " ".join(out.split())


#: Every character a replaced value or its placeholder is made of, white space included.
_VALUE_CHARS = "0123456789abcdefxtz<>nhuidsm:.,+-"
_NOT_VALUE_ASCII = str.maketrans("", "", _VALUE_CHARS + "".join(
    c for c in map(chr, range(128)) if c.isspace()))
_NOT_VALUE = re.compile(rf"[\d\s{re.escape(_VALUE_CHARS)}]+")


def template_key(text: str) -> str:
    """A key that is the same for any two texts of one template (two texts with the same key
    may still differ in template), several times cheaper than `template_form`: the lower-cased
    text without the characters that the form replaces or puts in their place. Recall ranks a
    hundred memories at a time, mostly of different templates; it computes the forms only of
    those whose keys meet."""
    low = text.lower()
    # ASCII text has no other digits or white space than these (str.translate is C's loop)
    return low.translate(_NOT_VALUE_ASCII) if low.isascii() else _NOT_VALUE.sub("", low)


def template_hash_of_form(summary_form: str, detail_form: str = "") -> str:
    """`template_hash` of texts whose template forms are already at hand."""
    return _digest(summary_form, detail_form)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:32]


def exact_hash(summary: str, detail: str = "") -> str:
    """Equal for texts that differ only in timestamps and spacing."""
    return _digest(exact_form(summary), exact_form(detail))


def template_hash(summary: str, detail: str = "") -> str:
    """Equal for texts of one template (differing only in numbers, ids, timestamps)."""
    return _digest(template_form(summary), template_form(detail))
