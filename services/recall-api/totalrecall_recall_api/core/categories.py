"""Category filters: a request's `category` names one category of the taxonomy
(`system.service`) or a family of them, written as a prefix that ends in `.*` (`system.*`: every
`system.` category; `agent.*`: `agent.action`).

A filter is expanded here, once, into the taxonomy's categories it names, before it reaches any
path that filters by category: the vector index's filter (the indexer pastes the values into
Zvec's `category IN (…)`), keyword search, neighbours, the threads of a continuation, the
repeats of a template, the diagnostic lookup, the timeline. Each of them compares whole category
names and none has to understand a pattern.

The taxonomy is closed (`totalrecall_schema.CATEGORIES`: an event of any other category is refused
on ingest, and a rebuild reads events through the same model), so the expansion is every category
a stored memory can have: no prefix match is needed in SQL. A filter that names no category of the
taxonomy could only ever match nothing, so it is refused (the API answers 422 with the reason)
instead of recalling nothing in silence.
"""

from __future__ import annotations

from collections.abc import Iterable

from totalrecall_schema import CATEGORIES

#: How a family of categories is written: its prefix, then this.
FAMILY = ".*"


class UnknownCategory(ValueError):
    """A category filter that names no category of the taxonomy."""


def categories_of(pattern: str | None, taxonomy: Iterable[str] = CATEGORIES) -> tuple[str, ...] | None:
    """The categories `pattern` names, in the taxonomy's order; None: no filter (no pattern,
    or an empty one, as before). Raises `UnknownCategory` when it names none."""
    if not pattern:
        return None
    known = tuple(taxonomy)
    if pattern in known:
        return (pattern,)
    if pattern.endswith(FAMILY):
        prefix = pattern[: -len(FAMILY) + 1]  # "system." of "system.*"
        found = tuple(c for c in known if c.startswith(prefix)) \
            if len(prefix) > 1 and "*" not in prefix else ()
        if found:
            return found
        raise UnknownCategory(f"category {pattern!r} matches no category; a family is written "
                              f"as the prefix of its categories and '{FAMILY}' (e.g. "
                              f"'system{FAMILY}'); {_listing(known)}")
    hint = ""
    if any(c.startswith(pattern + ".") for c in known):
        hint = f" (its family: '{pattern}{FAMILY}')"
    raise UnknownCategory(f"unknown category {pattern!r}{hint}; {_listing(known)}")


def category_list(pattern: str | None) -> list[str] | None:
    """`categories_of` as a list (the vector index's filter)."""
    found = categories_of(pattern)
    return None if found is None else list(found)


def _listing(known: tuple[str, ...]) -> str:
    families = sorted({c.rsplit(".", 1)[0] + FAMILY for c in known if "." in c})
    return f"expected one of: {', '.join(known)}, or a family: {', '.join(families)}"
