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

_SPACE = re.compile(r"\s+")

_TIMESTAMPS: list[tuple[re.Pattern[str], str]] = [
    # ISO-8601 / RFC-3339 date-times and dates, with fractions and zones
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[tT ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
                r"(?:[zZ]|[+-]\d{2}:?\d{2})?)?\b"), "<ts>"),
    # clock times, with fractions
    (re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?\b"), "<time>"),
]

_IDENTIFIERS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    *_TIMESTAMPS,
    # hex: 0x…, and hex words of ≥7 characters containing a digit (hashes, addresses, ids)
    (re.compile(r"\b0x[0-9a-f]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"), "<hex>"),
    # any remaining number: PIDs, ports, sizes, percentages, counters, IPs, block ids
    (re.compile(r"-?\d+(?:[.,]\d+)*"), "<n>"),
]


def exact_form(text: str) -> str:
    """`text` with date-times and clock times replaced and white space collapsed (case kept)."""
    out = text
    for pattern, repl in _TIMESTAMPS:
        out = pattern.sub(repl, out)
    return _SPACE.sub(" ", out).strip()


def template_form(text: str) -> str:
    """Lower-case `text` with numbers, hex, UUIDs, IPs, ids and timestamps replaced."""
    out = text.lower()
    for pattern, repl in _IDENTIFIERS:
        out = pattern.sub(repl, out)
    return _SPACE.sub(" ", out).strip()


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:32]


def exact_hash(summary: str, detail: str = "") -> str:
    """Equal for texts that differ only in timestamps and spacing."""
    return _digest(exact_form(summary), exact_form(detail))


def template_hash(summary: str, detail: str = "") -> str:
    """Equal for texts of one template (differing only in numbers, ids, timestamps)."""
    return _digest(template_form(summary), template_form(detail))
