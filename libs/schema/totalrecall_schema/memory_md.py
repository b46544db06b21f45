"""MEMORY.md: curated, evergreen memory written by people (and agents), indexed like events.

`<home>/memory/MEMORY.md` is plain Markdown. Each top-level bullet becomes one memory; the prose
of a section (paragraphs outside bullets) becomes one memory for that section. Fenced code stays
with the bullet or prose it follows. Example:

    # Memory

    ## Preferences
    - Prefers podman over docker for containers.
    - Editor: helix; never suggest vim keybindings.
      Continuation lines and nested bullets belong to the bullet above.

    ## Known problems
    <!-- category: diagnosis/workaround -->
    - Wi-Fi drops after suspend: `systemctl restart iwd` fixes it.

Category: an HTML comment `<!-- category: <category>[/<subcategory>] -->` in a section applies to
it and its subsections; otherwise heading words choose one (Preferences, Habits → user_pattern;
Problems, Fixes, Diagnosis, Lessons → diagnosis; …); otherwise `conversation/note`.
`<!-- namespace: <ns> -->` likewise picks the namespace (default: the indexer's setting).

Ids are derived from the content (section path + text): editing a bullet replaces its memory,
deleting it removes the memory. Memories from MEMORY.md have `source="MEMORY.md"`.

The one parser of the file: the indexer makes its memories with `parse_memory_md`, the CLI's
OpenClaw importer reads one with it, and recall-api shows the file to a namespace line by line
as `line_namespaces` attributes the lines (the same pass: a line belongs to the memory it is
part of, or to the section it stands in, and so to that memory's or section's namespace).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from .events import memory_key
from .taxonomy import CATEGORIES

SOURCE = "MEMORY.md"
ID_PREFIX = "memorymd-"
DEFAULT_CATEGORY = ("conversation", "note")
SUMMARY_MAX = 400

_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET_RE = re.compile(r"^( ?)(?:[-*+]|\d{1,9}[.)])(?:\s+(.*))?$")  # top level only
_FENCE_RE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_DIRECTIVE_RE = re.compile(r"^\s*<!--\s*(category|namespace)\s*:\s*([^\s>]+)\s*-->\s*$", re.I)
_RULE_RE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_COMMENT_RE = re.compile(r"<!--.*?-->", re.S)
_SUBCATEGORY_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

#: Heading words → (category, subcategory); the first match wins, nearest heading first.
HEADING_CATEGORIES: tuple[tuple[tuple[str, ...], tuple[str, str]], ...] = (
    (("preference", "likes", "dislikes", "taste"), ("user_pattern", "preference")),
    (("habit", "routine", "workflow"), ("user_pattern", "habit")),
    (("schedule", "work session", "working hours"), ("user_pattern", "work_session")),
    (("about me", "about the user", "user", "profile", "pattern"), ("user_pattern", "preference")),
    (("workaround",), ("diagnosis", "workaround")),
    (("root cause",), ("diagnosis", "root_cause")),
    (("fix", "solution", "resolution", "resolved"), ("diagnosis", "resolution")),
    (("diagnos", "problem", "issue", "troubleshoot", "lesson", "gotcha", "pitfall", "incident",
      "debug", "bug"), ("diagnosis", "investigation")),
    (("nixos", "configuration", "config", "setup", "dotfile"), ("system.config", "edit")),
    (("package",), ("system.package", "install")),
    (("service", "daemon"), ("system.service", "status_change")),
    (("network", "wifi", "wi-fi", "vpn", "dns"), ("system.network", "connect")),
    (("security", "secret", "ssh", "sudo"), ("security", "login")),
)


@dataclass
class Entry:
    """One memory parsed from MEMORY.md."""

    id: str
    namespace: str
    category: str
    subcategory: str
    summary: str
    detail: str
    section: list[str] = field(default_factory=list)
    line: int = 0

    @property
    def key(self) -> str:
        return memory_key(self.namespace, self.id)


def category_for(headings: list[str]) -> tuple[str, str] | None:
    """The category heading words suggest (nearest heading first), or None."""
    for heading in reversed(headings):
        h = heading.lower()
        for cat in CATEGORIES:  # a heading may name a category outright
            if h.strip() == cat or h.strip().replace(" ", "_") == cat:
                return cat, _default_sub(cat)
        for words, cat_sub in HEADING_CATEGORIES:
            if any(re.search(rf"\b{re.escape(w)}", h) for w in words):
                return cat_sub
    return None


def _default_sub(category: str) -> str:
    subs = CATEGORIES.get(category) or ("general",)
    return "note" if "note" in subs else subs[0]


def _parse_category(value: str) -> tuple[str, str] | None:
    cat, _, sub = value.strip().partition("/")
    if cat not in CATEGORIES:
        return None
    sub = sub.strip().lower() or _default_sub(cat)
    return (cat, sub) if _SUBCATEGORY_RE.match(sub) else (cat, _default_sub(cat))


def _clean(text: str) -> str:
    return _COMMENT_RE.sub("", text).strip()


def _dedent(lines: list[str]) -> list[str]:
    widths = [len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()]
    cut = min(widths, default=0)
    return [ln[cut:] for ln in lines]


@dataclass
class _Section:
    level: int
    title: str
    category: tuple[str, str] | None = None
    namespace: str | None = None


@dataclass
class _Item:
    kind: str  # "bullet" | "prose"
    lines: list[str]
    line: int
    sections: list[_Section]


def _parse(text: str) -> _Parser:
    parser = _Parser()
    for n, raw in enumerate(text.splitlines(), start=1):
        parser.feed(n, raw)
    return parser


def parse_memory_md(text: str, namespace: str = "default") -> list[Entry]:
    """Every memory of a MEMORY.md text, in file order (pure; ids stable across runs)."""
    parser = _parse(text)
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for item in parser.items:
        entry = _entry(item, namespace)
        if entry is None:
            continue
        k = entry.key
        if k in seen:  # the same text twice in one section: keep both, distinct ids
            seen[k] += 1
            entry.id = f"{entry.id}-{seen[k]}"
        else:
            seen[k] = 1
        entries.append(entry)
    return entries


def line_namespaces(text: str, default_namespace: str) -> list[str]:
    """The namespace of each line of a MEMORY.md text (`str.splitlines`' lines): that of the
    memory it is part of (`parse_memory_md`'s), or of the section it stands in. A section's
    namespace is known once the whole file is read (its comment may come last)."""
    return [next((s.namespace for s in reversed(owner) if s.namespace), default_namespace)
            for owner in _parse(text).owners]


class _Parser:
    """MEMORY.md line by line: its sections (headings, directives) and items (bullets, each
    section's prose)."""

    def __init__(self) -> None:
        self.stack: list[_Section] = []
        self.items: list[_Item] = []
        self.current: _Item | None = None  # where continuation lines go
        self.prose: _Item | None = None  # the prose of the current section (one memory per section)
        self.fence: str | None = None
        self.blank_before = False
        #: Per line fed, the sections it belongs to: its item's, else those it stands in.
        self.owners: list[list[_Section]] = []

    def _owner(self) -> list[_Section]:
        return self.current.sections if self.current is not None else list(self.stack)

    def feed(self, n: int, raw: str) -> None:
        line = raw.rstrip()
        if self.fence is not None:  # verbatim until the closing fence
            self.owners.append(self._owner())
            if self.current is not None:
                self.current.lines.append(raw)
            body = line.strip()
            if body.startswith(self.fence) and not body.lstrip(self.fence[0]):
                self.fence = None
            return
        indented = raw.startswith(("  ", "\t"))
        if self._section(line, indented):
            self.owners.append(list(self.stack))
            return
        if not line.strip():
            self.blank_before = True
            self.owners.append(self._owner())
            return
        self._content(n, raw, line, indented)
        self.owners.append(self._owner())
        self.blank_before = False

    def _section(self, line: str, indented: bool) -> bool:
        """A heading or a directive (`<!-- category: … -->`): True when the line was one."""
        hm = _HEADING_RE.match(line)
        if hm and not indented:
            level = len(hm.group(1))
            while self.stack and self.stack[-1].level >= level:
                self.stack.pop()
            self.stack.append(_Section(level, _clean(hm.group(2))))
            self.current = self.prose = None
            self.blank_before = False
            return True
        dm = _DIRECTIVE_RE.match(line)
        if dm:
            name, value = dm.group(1).lower(), dm.group(2)
            if not self.stack:
                self.stack.append(_Section(0, ""))
            if name == "category":
                self.stack[-1].category = _parse_category(value)
            elif _NAMESPACE_RE.match(value):
                self.stack[-1].namespace = value
            return True
        return False

    def _content(self, n: int, raw: str, line: str, indented: bool) -> None:
        """A rule, a bullet, a bullet's continuation, or prose."""
        if _RULE_RE.match(line) and not indented:
            self.current = None
            return
        fm = _FENCE_RE.match(line)
        if fm:
            self.fence = fm.group(1)
        bm = None if fm else _BULLET_RE.match(line)
        current = self.current
        if bm:  # a new top-level bullet
            self.current = _Item("bullet", [bm.group(2) or ""], n, list(self.stack))
            self.items.append(self.current)
        elif current is not None and current.kind == "bullet" and (
                indented or not self.blank_before):
            if self.blank_before:
                current.lines.append("")
            current.lines.append(raw)
        else:
            self.current = self._add_to_prose(n, raw if fm else line.strip())

    def _add_to_prose(self, n: int, line: str) -> _Item:
        if self.prose is None:
            self.prose = _Item("prose", [], n, list(self.stack))
            self.items.append(self.prose)
        elif self.prose.lines and self.blank_before and self.prose.lines[-1] != "":
            self.prose.lines.append("")
        self.prose.lines.append(line)
        return self.prose


def _entry(item: _Item, default_namespace: str) -> Entry | None:
    body = "\n".join(item.lines)
    body = _COMMENT_RE.sub("", body) if "<!--" in body else body
    lines = body.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return None
    if item.kind == "bullet":
        first, rest = lines[0].strip(), _dedent(lines[1:])
        if not first:  # "-" alone on its line, text below
            first, rest = rest[0].strip(), rest[1:]
    else:
        head, _, tail = "\n".join(lines).partition("\n\n")
        first, rest = head.replace("\n", " ").strip(), tail.split("\n") if tail else []
    summary = first if len(first) <= SUMMARY_MAX else first[: SUMMARY_MAX - 1] + "…"
    detail_lines = list(rest)
    if summary != first:  # cut short: the detail holds the whole text
        detail_lines = [first, "", *detail_lines] if detail_lines else [first]
    detail = "\n".join(detail_lines).strip("\n")
    if not summary:
        return None
    titles = [s.title for s in item.sections if s.title]
    category = next((s.category for s in reversed(item.sections) if s.category), None)
    category = category or category_for(titles) or DEFAULT_CATEGORY
    namespace = next((s.namespace for s in reversed(item.sections) if s.namespace),
                     default_namespace)
    digest = hashlib.sha256("\x1f".join([*titles, "\x1e", summary, detail]).encode()).hexdigest()
    return Entry(id=f"{ID_PREFIX}{digest[:24]}", namespace=namespace, category=category[0],
                 subcategory=category[1], summary=summary, detail=detail, section=titles,
                 line=item.line)
