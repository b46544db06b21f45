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
the daily logs (`citations.scoped_text`). The lines are attributed by the one MEMORY.md parser,
the indexer's (`totalrecall_schema.memory_md.line_namespaces`): its patterns, its sections, its
continuation rules.
"""

from __future__ import annotations

from collections.abc import Collection

from totalrecall_schema.memory_md import line_namespaces

__all__ = ["line_namespaces", "scoped", "shown"]


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
