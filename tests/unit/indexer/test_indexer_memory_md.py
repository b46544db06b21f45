"""MEMORY.md parsing: one memory per top-level bullet / per section's prose, categories from
directives or heading words, ids stable and derived from the content."""

from __future__ import annotations

from totalrecall_schema import MemoryEvent
from totalrecall_schema.memory_md import ID_PREFIX, category_for, parse_memory_md

TEXT = """# Memory

Curated facts about this machine and its user.
Second line of the intro.

## Preferences
- Prefers podman over docker for containers.
- Editor: helix; never suggest vim keybindings.
  Continuation line of the editor bullet.
  - a nested bullet stays with its parent

    ```sh
    hx ~/.config/helix/config.toml
    ```
* Uses fish as the login shell.

## Known problems
<!-- category: diagnosis/workaround -->
- Wi-Fi drops after suspend: `systemctl restart iwd` fixes it.

Prose about known problems.

```
# not a heading, and
- not a bullet
```

### Laptop
- Inherits the section's category.

---

## Schedule
1. Works Mon-Fri 9-12 and 14-18.

## Ops notes
<!-- namespace: ops -->
- Backups run at 02:00 via restic.
"""


def test_bullets_and_prose_become_memories() -> None:
    entries = parse_memory_md(TEXT)
    got = [(e.category, e.subcategory, e.section[-1], e.summary) for e in entries]
    assert got == [
        ("conversation", "note", "Memory", "Curated facts about this machine and its user. "
                                           "Second line of the intro."),
        ("user_pattern", "preference", "Preferences", "Prefers podman over docker for containers."),
        ("user_pattern", "preference", "Preferences",
         "Editor: helix; never suggest vim keybindings."),
        ("user_pattern", "preference", "Preferences", "Uses fish as the login shell."),
        ("diagnosis", "workaround", "Known problems",
         "Wi-Fi drops after suspend: `systemctl restart iwd` fixes it."),
        ("diagnosis", "workaround", "Known problems", "Prose about known problems."),
        ("diagnosis", "workaround", "Laptop", "Inherits the section's category."),
        ("user_pattern", "work_session", "Schedule", "Works Mon-Fri 9-12 and 14-18."),
        ("conversation", "note", "Ops notes", "Backups run at 02:00 via restic."),
    ]
    editor = entries[2]
    assert editor.detail == ("Continuation line of the editor bullet.\n"
                             "- a nested bullet stays with its parent\n\n"
                             "  ```sh\n  hx ~/.config/helix/config.toml\n  ```")
    prose = entries[5]
    assert prose.detail == "```\n# not a heading, and\n- not a bullet\n```"
    assert [e.namespace for e in entries] == ["default"] * 8 + ["ops"]
    assert all(e.id.startswith(ID_PREFIX) for e in entries)
    assert len({e.key for e in entries}) == len(entries)
    # every entry makes a valid event
    for e in entries:
        MemoryEvent(id=e.id, namespace=e.namespace, category=e.category,
                    subcategory=e.subcategory, summary=e.summary, detail=e.detail)


def test_ids_are_stable_and_follow_the_content() -> None:
    a = {e.summary: e.id for e in parse_memory_md(TEXT)}
    assert a == {e.summary: e.id for e in parse_memory_md(TEXT)}
    # other sections edited, lines moved: untouched entries keep their ids
    edited = TEXT.replace("* Uses fish as the login shell.\n", "").replace(
        "## Schedule\n", "## Schedule\n- A new bullet.\n")
    b = {e.summary: e.id for e in parse_memory_md(edited)}
    assert "Uses fish as the login shell." not in b and "A new bullet." in b
    assert all(b[s] == a[s] for s in b if s in a)
    # an edited bullet is a new memory (the old one goes)
    c = {e.summary: e.id for e in parse_memory_md(TEXT.replace("podman", "Podman"))}
    assert "Prefers Podman over docker for containers." in c
    # the same text in another section is another memory
    moved = parse_memory_md("## A\n- same\n## B\n- same\n")
    assert len({e.id for e in moved}) == 2


def test_duplicates_long_bullets_and_namespace_default() -> None:
    long = "word " * 200
    entries = parse_memory_md(f"- dup\n- dup\n- {long}\n", namespace="home")
    assert [e.namespace for e in entries] == ["home"] * 3
    assert entries[0].id != entries[1].id and entries[1].id == entries[0].id + "-2"
    assert len(entries[2].summary) == 400 and entries[2].summary.endswith("…")
    assert entries[2].detail == long.strip()
    assert parse_memory_md("") == [] and parse_memory_md("# Only a title\n\n---\n") == []


def test_category_from_heading_words() -> None:
    assert category_for(["Memory", "Habits"]) == ("user_pattern", "habit")
    assert category_for(["Lessons learned"]) == ("diagnosis", "investigation")
    assert category_for(["Fixes"]) == ("diagnosis", "resolution")
    assert category_for(["diagnosis"]) == ("diagnosis", "investigation")
    assert category_for(["Network", "Random"]) == ("system.network", "connect")
    assert category_for(["Misc"]) is None
    bad = parse_memory_md("## X\n<!-- category: nonsense -->\n- falls back\n")
    assert (bad[0].category, bad[0].subcategory) == ("conversation", "note")
