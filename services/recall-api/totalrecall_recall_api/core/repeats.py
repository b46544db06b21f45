"""Near-duplicates: memories of one template (the same text but for numbers and ids).

A watcher that reports "python3 (PID 4182) using 97% CPU" every few minutes, or a log with one
"PacketResponder 1 for block blk_… terminating" line per block, leaves many memories that the
model embeds alike and that match the same words: their fused scores tie but for noise. The
operator's rule decides instead: the memory whose identifiers the question names comes first,
then the one that has the question's values in the question's context ("task 24.0" in "Running
task 24.0 in stage 26.0", not in "… task 43.0 in stage 24.0"), then the one with more explicit
evidence (a boost: the date the question names, the actor, …), then the newest. The group's
scores are handed out again in that order, so the group as a whole ranks where it did, and
memories of other templates are untouched.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache, partial
from itertools import pairwise

from totalrecall_schema.templates import template_form, template_hash_of_form, template_key

from .fusion import Candidate, by_score

_TOKEN = re.compile(r"[\w.:/@+-]+")
_SPLIT = re.compile(r"[/:@,=+]+")
_EDGE = ".-:@"
#: Texts seen by the memo functions below: a memory's text never changes and the same memories
#: come back recall after recall, so each is parsed once (the parsing was a third of a recall's
#: CPU time under load; docs/perf/2026-11-26-sustained-load.md).
_MEMO = 8192

_form_of = lru_cache(maxsize=_MEMO)(template_form)
_key_of = lru_cache(maxsize=_MEMO)(template_key)


@lru_cache(maxsize=_MEMO)
def template_of(text: str) -> str:
    """The template of a text (`template_hash`: memories of one template are near-duplicates)."""
    return template_hash_of_form(_form_of(text))


def _shared_templates(cands: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """`cands` by template, leaving out those no other candidate can share a template with:
    recall ranks about a hundred memories, the template of a long one costs ~0.3 ms, and most
    share none (`template_key` tells them apart for a fraction of that)."""
    keys = Counter(_key_of(c.text) for c in cands)
    groups: dict[str, list[Candidate]] = {}
    for c in cands:
        if keys[_key_of(c.text)] > 1:
            groups.setdefault(template_of(c.text), []).append(c)
    return groups


#: What `template_form` puts in place of a number, id or time: a text with none has no repeats
#: that differ from it (the embedder folds exact repeats into one memory).
_SLOT = re.compile(r"<(?:n|hex|uuid|ts|time)>")


@lru_cache(maxsize=_MEMO)
def identifiers(text: str) -> frozenset[str]:
    """The tokens of `text` that carry a digit (ids, IPs, ports, PIDs, block ids, versions),
    whole and split at `/ : @ , = +` (so `/10.0.0.1:50010` also gives `10.0.0.1`)."""
    out: set[str] = set()
    for tok in _TOKEN.findall(text.lower()):
        for part in (tok, *_SPLIT.split(tok)):
            part = part.strip(_EDGE).rstrip("/")
            if part and any(ch.isdigit() for ch in part):
                out.add(part)
    return frozenset(out)


@lru_cache(maxsize=_MEMO)
def value_pairs(text: str) -> frozenset[tuple[str, str]]:
    """The pairs of neighbouring words of `text` of which one carries a digit: a value in its
    context (`("task", "24.0")`, `("variable", "11")`, `("user", "test9")`)."""
    words = [w.strip(_EDGE).rstrip("/") for w in _TOKEN.findall(text.lower())]
    words = [w for w in words if w]
    return frozenset((a, b) for a, b in pairwise(words)
                     if any(ch.isdigit() for ch in a + b))


#: How much lower each member of a template scores than the one before it where scores tie.
_STEP = 1e-6

#: Score components that measure likeness (and so tie within a template), not explicit evidence.
_LIKENESS = frozenset({"vector", "bm25", "recency", "neighbour", "repeat_order", "repeat_of"})


def slotted_templates(ranked: Sequence[Candidate], k: int,
                      named: frozenset[str] = frozenset(),
                      summary_of: Mapping[str, str] | None = None) -> list[str]:
    """The templates of the first `k` candidates that have repeats: texts with a number, id or
    time in them ("PacketResponder 2 for block blk_… terminating"), best first. Not the template
    of a candidate carrying an identifier the question names (`named`): that memory is the one
    asked about, and its template's other members are other events.

    The templates are the ones the store keeps (`template_hash` of a memory's summary):
    `summary_of` gives each candidate's summary by key, where its text also holds the detail (a
    journal line's priority, unit and PID); without it, the text is taken for the summary."""
    top = ranked[:k]

    def kept(c: Candidate) -> str:
        return template_of(summary_of.get(c.key, c.text) if summary_of else c.text)
    asked = {kept(c) for c in top if named and named & identifiers(c.text)}
    return [t for t in dict.fromkeys(kept(c) for c in top
                                     if _SLOT.search(_form_of(c.text))) if t not in asked]


def with_newest_repeats(ranked: Sequence[Candidate], newest: Iterable[Candidate]
                        ) -> list[Candidate]:
    """`ranked` and the members of its templates in `newest` it lacks (the store's newest of
    each template), each at the lowest score of its template's members and with that member's
    lifts (component `repeat_of`):
    the searches return some of a template's hundreds of members, chosen by embedding noise,
    and the operator's rule (`order_repeats`: the newest first) must see the newest ones."""
    out = list(ranked)
    newest = list(newest)
    have = {c.key for c in out}
    # Only the templates of the newest matter: the lowest score of each of those, not of all.
    fresh = [c for c in newest if c.key not in have]
    wanted = {template_of(c.text) for c in fresh}
    if not wanted:
        return out
    could = {_key_of(c.text) for c in fresh}  # the others' templates are not computed
    low: dict[str, Candidate] = {}
    for c in out:
        if _key_of(c.text) not in could:
            continue
        t = template_of(c.text)
        if t in wanted and (t not in low or c.score < low[t].score):
            low[t] = c
    added = False
    for c in newest:
        t = template_of(c.text)
        if c.key in have or t not in low:
            continue
        # What that member was lifted by (the question's intent, the kind of value it asks
        # for) holds for every line of its template: without it, `order_repeats` would count
        # the lift as evidence for the older members and never put the newest first.
        like = low[t]
        c.score = like.score
        c.components = {**{k: v for k, v in like.components.items() if k not in _LIKENESS},
                        "repeat_of": round(like.score, 6)}
        out.append(c)
        have.add(c.key)
        added = True
    if added:
        out.sort(key=by_score, reverse=True)
    return out


def _order_key(c: Candidate, named: frozenset[str], pairs: frozenset[tuple[str, str]]
               ) -> tuple[int, int, float, datetime, str]:
    comps = c.components
    # Most members carry likeness alone: nothing to add up (the test is one pass in C).
    boosts = 0.0 if _LIKENESS.issuperset(comps) else round(
        sum([v for k, v in comps.items() if k not in _LIKENESS]), 6)
    # Last the key: repeats logged in the same second would otherwise keep the order of their
    # fused scores, which differ by embedding noise (a batch of other texts shifts a vector in
    # its last digits), and the same question would rank them differently after a re-import.
    return (len(named & identifiers(c.text)) if named else 0,
            len(pairs & value_pairs(c.text)) if pairs else 0, boosts, c.timestamp, c.key)


def order_repeats(ranked: Iterable[Candidate], query: str) -> list[Candidate]:
    """`ranked` best first, each template's members reordered: the most identifiers named by
    `query` first, then the most of its values in their context, then boosts, then the newest.
    Returns the candidates sorted by their new scores."""
    cands = list(ranked)
    groups = _shared_templates(cands)
    named, pairs = identifiers(query), value_pairs(query)
    key = partial(_order_key, named=named, pairs=pairs)
    for members in groups.values():
        if len(members) < 2:
            continue
        scores = sorted(map(by_score, members), reverse=True)
        best_first = sorted(members, key=key, reverse=True)
        last = float("inf")
        for c, score in zip(best_first, scores, strict=True):
            # Tied scores would leave the members in their old order (the sort is stable).
            score = last = min(score, last - _STEP)
            if score != c.score:
                c.components["repeat_order"] = round(score - c.score, 6)
                c.score = score
    cands.sort(key=by_score, reverse=True)
    return cands
