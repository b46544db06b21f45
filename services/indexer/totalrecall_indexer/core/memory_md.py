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
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from totalrecall_schema import CATEGORIES, memory_key

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


def parse_memory_md(text: str, namespace: str = "default") -> list[Entry]:
    """Every memory of a MEMORY.md text, in file order (pure; ids stable across runs)."""
    stack: list[_Section] = []
    items: list[_Item] = []
    current: _Item | None = None  # where continuation lines go
    prose: _Item | None = None  # the prose of the current section (one memory per section)
    fence: str | None = None
    blank_before = False

    def add_to_prose(n: int, line: str) -> _Item:
        nonlocal prose
        if prose is None:
            prose = _Item("prose", [], n, list(stack))
            items.append(prose)
        elif prose.lines and blank_before and prose.lines[-1] != "":
            prose.lines.append("")
        prose.lines.append(line)
        return prose

    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if fence is not None:  # verbatim until the closing fence
            if current is not None:
                current.lines.append(raw)
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
            stack.append(_Section(level, _clean(hm.group(2))))
            current = prose = None
            blank_before = False
            continue
        dm = _DIRECTIVE_RE.match(line)
        if dm:
            name, value = dm.group(1).lower(), dm.group(2)
            if not stack:
                stack.append(_Section(0, ""))
            if name == "category":
                stack[-1].category = _parse_category(value)
            elif _NAMESPACE_RE.match(value):
                stack[-1].namespace = value
            continue
        if not line.strip():
            blank_before = True
            continue
        if _RULE_RE.match(line) and not indented:
            current = None
            blank_before = False
            continue
        fm = _FENCE_RE.match(line)
        if fm:
            fence = fm.group(1)
        bm = None if fm else _BULLET_RE.match(line)
        if bm:  # a new top-level bullet
            current = _Item("bullet", [bm.group(2) or ""], n, list(stack))
            items.append(current)
        elif current is not None and current.kind == "bullet" and (indented or not blank_before):
            if blank_before:
                current.lines.append("")
            current.lines.append(raw)
        else:
            current = add_to_prose(n, raw if fm else line.strip())
        blank_before = False

    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for item in items:
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
