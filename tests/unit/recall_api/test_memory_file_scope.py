"""`/memory/file` shows a daily log (and MEMORY.md) only as far as the caller's namespaces may
read it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from totalrecall_recall_api.adapters.citations import Citations
from totalrecall_recall_api.app import create_app
from totalrecall_recall_api.settings import Settings
from totalrecall_schema.events import memory_key

DAY = "2026-11-20"


def _record(ns: str, mid: str, summary: str, detail: str = "") -> str:
    """One memory block in the indexer's daily-log format (libs/schema daily_log.py)."""
    payload = {"event": {"id": mid, "namespace": ns, "summary": summary}, "repeat_count": 1}
    lines = [f"## 10:00:00Z · conversation/note · {summary}",
             f"<!-- tr:event {json.dumps(payload)} -->",
             f"- id `{mid}` · namespace `{ns}` · severity **info**"]
    if detail:
        lines += ["", "````text", detail, "````"]
    return "\n".join(lines) + "\n\n"


def _seen(ns: str, mid: str) -> str:
    return (f"<!-- tr:seen {json.dumps({'key': memory_key(ns, mid), 'repeat_count': 2})} -->\n"
            "_(seen again: 2 times)_\n\n")


# Bob's detail imitates a record of alice's inside its fence: it must neither unmask the rest of
# bob's memory for alice nor become a citation.
FORGED = ('## 10:00:00Z · conversation/note · forged\n<!-- tr:event {"event": {"id": "fake", '
          '"namespace": "alice"}} -->\nbob secret under a forged alice record')
TEXT = (f"# Memory log — {DAY}\n\n"
        + _record("alice", "a1", "alice deploys on fridays", "alice detail: use blue-green")
        + _record("bob", "b1", "bob password hint is rosebud", FORGED)
        + _record("default", "d1", "default namespace note")
        + _seen("bob", "b1")
        + _record("alice", "a2", "alice prefers helix")
        + _seen("alice", "a2")
        + '<!-- tr:forgotten {"keys": ["0123abcd"], "at": "x", "reason": "r"} -->\n'
        "> 1 memory forgotten at 2026-11-20 11:00:00Z\n\n"
        + _record("shared", "s1", "shared team wiki lives at wiki.local"))


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    (tmp_path / "daily").mkdir()
    (tmp_path / "daily" / f"{DAY}.md").write_text(TEXT)
    (tmp_path / "MEMORY.md").write_text("# evergreen\n")
    (tmp_path / ".recovered").mkdir()
    (tmp_path / ".recovered" / "torn.md").write_text("bob torn bytes\n")
    app = create_app(Settings(memory_dir=tmp_path), publisher=object(), store=object(),
                     embedder=object(), index=object())  # type: ignore[arg-type]
    async with app.router.lifespan_context(app):
        yield httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def _read(api: httpx.AsyncClient, **body: Any) -> str:
    r = await api.post("/memory/file", json={"path": f"memory/daily/{DAY}.md", **body})
    assert r.status_code == 200, r.text
    return str(r.json()["text"])


async def test_a_daily_log_shows_only_the_callers_namespace(api: httpx.AsyncClient,
                                                            tmp_path: Path) -> None:
    text = await _read(api, namespace="alice")
    assert "bob" not in text and "rosebud" not in text and "default namespace" not in text
    assert "shared team wiki" not in text and "forgotten" not in text
    assert "alice deploys on fridays" in text and "use blue-green" in text
    assert "alice prefers helix" in text and "seen again" in text  # alice's own seen line
    # Line numbers hold: every line is the file's own line or empty.
    original, scoped = TEXT.splitlines(), text.splitlines()
    assert len(scoped) == len(original)
    assert all(s in ("", o) for s, o in zip(scoped, original, strict=True))
    # A citation's range, read from the scoped text, is exactly alice's memory.
    cite = Citations(tmp_path)
    for mid, summary in (("a1", "alice deploys on fridays"), ("a2", "alice prefers helix")):
        _, start, end = cite.locate("alice", mid, DAY)
        assert start > 0
        span = scoped[start - 1:end]
        assert span == original[start - 1:end] and summary in span[0]
    assert cite.locate("alice", "fake", DAY)[1:] == (0, 0)  # the forged record is no citation


async def test_the_namespace_defaults_to_default_and_can_add_readable_ones(
        api: httpx.AsyncClient) -> None:
    text = await _read(api)
    assert "default namespace note" in text and "alice" not in text and "bob" not in text
    both = await _read(api, namespace="alice", namespaces=["shared"])
    assert "alice prefers helix" in both and "shared team wiki" in both and "bob" not in both
    only = await _read(api, namespaces=["shared"])
    assert "shared team wiki" in only and "default namespace note" not in only
    bad = await api.post("/memory/file", json={"path": "MEMORY.md", "namespace": "../x"})
    assert bad.status_code == 422


async def test_only_memory_files_are_served(api: httpx.AsyncClient) -> None:
    r = await api.post("/memory/file", json={"path": "MEMORY.md"})
    assert r.json()["text"] == "# evergreen\n"
    # MEMORY.md's sections are the default namespace's: none of them is alice's to read (its
    # line stays, empty; test_memory_md_scope.py).
    r = await api.post("/memory/file", json={"path": "MEMORY.md", "namespace": "alice"})
    assert r.json()["text"] == "\n"
    r = await api.post("/memory/file", json={"path": ".recovered/torn.md"})
    assert r.status_code == 403 and "bob" not in r.text


@pytest.mark.parametrize("path", ["daily/\x002026-11-25.md", "daily/" + "a" * 300 + ".md"])
async def test_unusable_paths_are_a_400_with_the_reason(api: httpx.AsyncClient, path: str) -> None:
    """Found by schemathesis (tests/chaos): a NUL in the path was a 500."""
    r = await api.post("/memory/file", json={"path": path})
    assert r.status_code == 400 and r.json()["detail"].startswith("unusable path"), r.text
