"""MEMORY.md as a namespace may read it.

People write one `<home>/memory/MEMORY.md`; its sections may belong to different namespaces. The
indexer makes a memory of each top-level bullet and of each section's prose, in the namespace
that its section names with `<!-- namespace: x -->` (in that section or in one above it, anywhere
in the section, lines above the comment included), else in its own setting
`memory_md_namespace` ("default"). Those memories are recalled in their namespace only; the file
itself, which the session-start bundle shows and `/memory/file` serves, must be read the same
way: no one reads what is not theirs.

`scoped` keeps the lines of the memories (and of the headings, comments and rules) of the
namespaces read and turns every other line into an empty line, so that line numbers hold, as in
the daily logs (`citations.scoped_text`). The lines are attributed as the indexer's parser
(`totalrecall_indexer.core.memory_md.parse_memory_md`) attributes them: its patterns, its
sections, its continuation rules (a test holds the two together).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

# The indexer's patterns (`totalrecall_indexer.core.memory_md`).
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET_RE = re.compile(r"^( ?)(?:[-*+]|\d{1,9}[.)])(?:\s+(.*))?$")  # top level only
_FENCE_RE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_DIRECTIVE_RE = re.compile(r"^\s*<!--\s*(category|namespace)\s*:\s*([^\s>]+)\s*-->\s*$", re.I)
_RULE_RE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(eq=False)
class _Section:
    level: int
    namespace: str | None = None


def line_namespaces(text: str, default_namespace: str) -> list[str]:
    """The namespace of each line of a MEMORY.md text (`str.splitlines`' lines): that of the
    memory it is part of, or of the section it stands in."""
    stack: list[_Section] = []
    owners: list[list[_Section]] = []  # per line, the sections it belongs to
    current: list[_Section] | None = None  # the item continuation lines go to
    current_is_bullet = False
    prose: list[_Section] | None = None  # the current section's prose (one memory)
    fence: str | None = None
    blank_before = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if fence is not None:  # verbatim until the closing fence, with the item it is in
            owners.append(current if current is not None else list(stack))
            body = line.strip()
            if body.startswith(fence) and not body.lstrip(fence[0]):
                fence = None
            continue
        indented = raw.startswith(("  ", "\t"))
        hm = _HEADING_RE.match(line)
        if hm and not indented:
            level = len(hm.group(1))
            while stack and stack[-1].level >= level:
                stack.pop()
            stack.append(_Section(level))
            current = prose = None
            blank_before = False
            owners.append(list(stack))
            continue
        dm = _DIRECTIVE_RE.match(line)
        if dm:
            if not stack:  # before any heading: the whole file's
                stack.append(_Section(0))
            if dm.group(1).lower() == "namespace" and _NAMESPACE_RE.match(dm.group(2)):
                stack[-1].namespace = dm.group(2)
            owners.append(list(stack))
            continue
        if not line.strip():
            blank_before = True
            owners.append(current if current is not None else list(stack))
            continue
        if _RULE_RE.match(line) and not indented:
            current = None
            blank_before = False
            owners.append(list(stack))
            continue
        fm = _FENCE_RE.match(line)
        if fm:
            fence = fm.group(1)
        if not fm and _BULLET_RE.match(line):  # a new top-level bullet
            current, current_is_bullet = list(stack), True
        elif not (current is not None and current_is_bullet and (indented or not blank_before)):
            if prose is None:
                prose = list(stack)
            current, current_is_bullet = prose, False
        owners.append(current)
        blank_before = False
    # A section's namespace is known once the whole file is read (its comment may come last).
    return [next((s.namespace for s in reversed(o) if s.namespace), default_namespace)
            for o in owners]


def scoped(text: str, namespaces: Collection[str], default_namespace: str) -> str:
    """`text` with every line that is not of `namespaces` as an empty line (line count and
    line ends kept)."""
    readable = set(namespaces)
    return "".join(
        whole if ns in readable else whole[len(body):]  # its line end alone
        for whole, body, ns in zip(text.splitlines(keepends=True), text.splitlines(),
                                   line_namespaces(text, default_namespace), strict=True))


def shown(text: str, namespaces: Collection[str], default_namespace: str) -> str:
    """`scoped` for a prompt: without the emptied lines' gaps (one empty line at most between
    two lines, none around), "" when nothing of the file is the reader's."""
    out: list[str] = []
    for ln in scoped(text, namespaces, default_namespace).splitlines():
        if ln.strip() or (out and out[-1].strip()):
            out.append(ln)
    return "\n".join(out).strip("\n")
