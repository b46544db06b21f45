"""MEMORY.md is read per namespace: the session-start bundle of `/memory/warm` and `/memory/file`
show a namespace its own sections only (core/memory_md.py), as the indexer indexes them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_recall_api import FakeWorld, _client
from totalrecall_recall_api.core.memory_md import line_namespaces, scoped, shown
from totalrecall_recall_api.settings import MEMORY_MD_NAMESPACE_ENV, Settings
from totalrecall_schema.memory_md import parse_memory_md

# Sections of three namespaces, and the parser's corners: a comment below the lines it scopes,
# a subsection inheriting its parent's namespace and one naming its own, fenced text that looks
# like a heading or a comment, a bullet's continuation lines and nested bullets, prose.
TEXT = """\
# Memory

Evergreen notes of the machine.

## Preferences
- Prefers podman over docker for containers.
- Editor: helix; never suggest vim keybindings.
  Continuation lines and nested bullets belong to the bullet above.
  - a nested bullet of the editor line

## Alice's corner
- Alice deploys on fridays with blue-green.
<!-- namespace: alice -->

Alice keeps her notes in the wiki.

### Alice's servers
- alice-01 runs the staging database.
  ```
  # not a heading
  <!-- namespace: default -->
  ```

### Bob's servers
<!-- namespace: bob -->
- bob-07 holds the backups; the password hint is rosebud.

## Known problems
<!-- category: diagnosis/workaround -->
- Wi-Fi drops after suspend: `systemctl restart iwd` fixes it.

---
Prose after a rule, still the default's.
"""

DEFAULT_LINES = ("Evergreen notes", "Prefers podman", "Editor: helix", "nested bullet",
                 "Wi-Fi drops", "Prose after a rule")
ALICE_LINES = ("Alice deploys", "keeps her notes", "alice-01 runs", "# not a heading")
BOB_LINES = ("bob-07 holds", "rosebud")


def test_lines_are_attributed_as_the_indexer_parses_them() -> None:
    owners = line_namespaces(TEXT, "default")
    assert len(owners) == len(TEXT.splitlines())
    entries = parse_memory_md(TEXT, "default")
    assert {e.namespace for e in entries} == {"default", "alice", "bob"}
    for e in entries:
        # The memory's first line is its namespace's, and its text is shown to that namespace
        # alone.
        assert owners[e.line - 1] == e.namespace, (e.line, e.summary)
        for ns in ("default", "alice", "bob", "other"):
            assert (e.summary in scoped(TEXT, [ns], "default")) is (ns == e.namespace), \
                (ns, e.summary)
        for line in (e.detail or "").splitlines():
            if line.strip():
                assert line in scoped(TEXT, [e.namespace], "default")


def test_another_namespace_reads_none_of_the_defaults_sections() -> None:
    other = scoped(TEXT, ["other"], "default")
    assert not other.strip()
    assert other.count("\n") == TEXT.count("\n")  # line numbers hold
    assert shown(TEXT, ["other"], "default") == ""
    default = scoped(TEXT, ["default"], "default")
    assert all(s in default for s in DEFAULT_LINES)
    assert not any(s in default for s in (*ALICE_LINES, *BOB_LINES))
    alice = scoped(TEXT, ["alice"], "default")
    assert all(s in alice for s in ALICE_LINES)
    assert not any(s in alice for s in (*DEFAULT_LINES, *BOB_LINES))
    # Every line is the file's own or empty.
    for part in (other, default, alice):
        assert all(s in ("", o) for s, o in zip(part.splitlines(), TEXT.splitlines(),
                                                 strict=True))
    both = scoped(TEXT, ["alice", "bob"], "default")
    assert all(s in both for s in (*ALICE_LINES, *BOB_LINES))


def test_the_default_namespace_is_the_indexers() -> None:
    # Sections that name no namespace are the indexer's `memory_md_namespace`.
    mine = scoped(TEXT, ["me"], "me")
    assert "Prefers podman" in mine and "Alice deploys" not in mine
    assert "Prefers podman" not in scoped(TEXT, ["default"], "me")


def test_the_setting_is_read_from_the_indexers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_MD_NAMESPACE_ENV, raising=False)
    assert Settings().memory_md_namespace == "default"
    monkeypatch.setenv(MEMORY_MD_NAMESPACE_ENV, "me")
    assert Settings().memory_md_namespace == "me"
    assert Settings(memory_md_namespace="other").memory_md_namespace == "other"


def test_shown_closes_the_gaps() -> None:
    text = "# A\n\n- a\n\n## B\n<!-- namespace: b -->\n- b\n\n## C\n\n\n- c\n"
    assert shown(text, ["default"], "default") == "# A\n\n- a\n\n## C\n\n- c"
    assert shown(text, ["b"], "default") == "## B\n<!-- namespace: b -->\n- b"


# --- through the API ---------------------------------------------------------------------------
class Continuity(FakeWorld):
    async def notable(self, namespace: str, since: Any, limit: int) -> list[Any]:
        return []

    async def latest(self, namespace: str, category: str, subcategory: str) -> None:
        return None

    async def warm_terms(self, namespace: str) -> bool:
        return True


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    (tmp_path / "MEMORY.md").write_text(TEXT)
    c = await _client(Continuity(), memory_dir=tmp_path, memory_md_namespace="default")
    yield c
    await c._ctx.__aexit__(None, None, None)  # type: ignore[attr-defined]


async def _warm(api: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    r = await api.post("/memory/warm", json={"sessionId": "s", **body})
    assert r.status_code == 200, r.text
    assert r.json()["warmed"]["bundle"], r.text
    return r.json()  # type: ignore[no-any-return]


async def test_the_session_start_bundle_shows_a_namespace_its_own_sections(
        api: httpx.AsyncClient) -> None:
    other = await _warm(api, namespace="other")
    assert other["bundle"]["memory_md"] == ""
    assert "MEMORY.md" not in other["session_context"]
    assert not any(s in other["session_context"]
                   for s in (*DEFAULT_LINES, *ALICE_LINES, *BOB_LINES))

    default = await _warm(api)  # the default namespace
    assert all(s in default["bundle"]["memory_md"] for s in DEFAULT_LINES)
    assert "Curated memory (MEMORY.md):" in default["session_context"]
    assert "Prefers podman over docker" in default["session_context"]
    assert not any(s in default["session_context"] for s in (*ALICE_LINES, *BOB_LINES))

    alice = await _warm(api, namespace="alice", namespaces=["alice", "default"])
    assert all(s in alice["bundle"]["memory_md"] for s in (*ALICE_LINES, *DEFAULT_LINES))
    assert not any(s in alice["session_context"] for s in BOB_LINES)


async def test_memory_file_serves_a_namespace_its_own_sections(api: httpx.AsyncClient) -> None:
    async def read(**body: Any) -> str:
        r = await api.post("/memory/file", json={"path": "MEMORY.md", **body})
        assert r.status_code == 200, r.text
        return str(r.json()["text"])

    assert not (await read(namespace="other")).strip()
    default = await read()
    assert default.count("\n") == TEXT.count("\n")
    assert all(s in default for s in DEFAULT_LINES) and "rosebud" not in default
    bob = await read(namespace="bob")
    assert "rosebud" in bob and "Prefers podman" not in bob and "Alice" not in bob
    assert await read(namespace="alice", namespaces=["bob", "default"]) == \
        scoped(TEXT, ["alice", "bob", "default"], "default")
