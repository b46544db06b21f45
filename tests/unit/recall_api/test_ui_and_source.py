"""The web page at /ui (static, no data, no token needed to load it; the API calls it makes still
need the token) and `GET /memory/source` (a memory's Markdown record, scoped by namespace)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

# The daily-log record of one memory, as the indexer writes it (same folder, no package).
from test_memory_file_scope import _record
from test_recall_api import Built
from totalrecall_recall_api.adapters.citations import Citations
from totalrecall_recall_api.app import create_app
from totalrecall_recall_api.ports import Row
from totalrecall_recall_api.settings import Settings
from totalrecall_schema import Memory
from totalrecall_schema.events import memory_key

DAY = "2026-11-20"
# 23:30 UTC on DAY, as a store in another zone may hand it over: the log's day is the UTC one.
TS = datetime(2026, 11, 21, 1, 30, tzinfo=timezone(timedelta(hours=2)))


# b1's detail imitates a record of a1 inside its fence: it must not end b1's block early.
FORGED = ('## 10:00:00Z · conversation/note · forged\n<!-- tr:event {"event": {"id": "a1", '
          '"namespace": "alice"}} -->\nstill bob')
TEXT = (f"# Memory log — {DAY}\n\n"
        + _record("alice", "a1", "alice deploys on fridays", "use blue-green")
        + _record("bob", "b1", "bob password hint", FORGED)
        + f'<!-- tr:seen {json.dumps({"key": memory_key("bob", "b1"), "repeat_count": 2})} -->\n'
        + "_(seen again: 2 times)_\n\n"
        + _record("alice", "same", "alice's memory with a shared id")
        + _record("bob", "same", "bob's memory with a shared id"))


class Rows:
    """A store that knows the rows of the memories in TEXT (and one not in the log)."""

    def __init__(self) -> None:
        self.known = {memory_key(ns, mid): Memory(id=mid, namespace=ns, score=0, timestamp=TS,
                                                 category="conversation", summary=mid)
                     for ns, mid in [("alice", "a1"), ("bob", "b1"), ("alice", "same"),
                                     ("bob", "same"), ("alice", "unlogged")]}

    async def rows(self, keys: Sequence[str]) -> dict[str, Row]:
        return {k: Built(self.known[k]) for k in keys if k in self.known}


@pytest.fixture
async def memory_dir(tmp_path: Path) -> Path:
    (tmp_path / "daily").mkdir()
    (tmp_path / "daily" / f"{DAY}.md").write_text(TEXT)
    return tmp_path


async def _client(memory_dir: Path, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(memory_dir=memory_dir, **settings), publisher=object(),
                     store=Rows(), embedder=object(), index=object())  # type: ignore[arg-type]
    async with app.router.lifespan_context(app):
        yield httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


@pytest.fixture
async def api(memory_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(memory_dir):
        yield client


@pytest.fixture
async def api_with_token(memory_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _client(memory_dir, api_token="s3cret"):
        yield client


# --- Citations.source (pure) ------------------------------------------------------------------
def test_source_is_the_memorys_own_block(memory_dir: Path) -> None:
    found = Citations(memory_dir).source("alice", "a1", DAY)
    assert found is not None
    assert found.path == f"memory/daily/{DAY}.md"
    lines = TEXT.splitlines()
    assert lines[found.start_line - 1].startswith("## 10:00:00Z") and "alice deploys" in lines[
        found.start_line - 1]
    assert found.text == "\n".join(lines[found.start_line - 1:found.end_line]) + "\n"
    assert "use blue-green" in found.text and found.text.rstrip().endswith("````")
    assert "bob" not in found.text  # ends before the next record, trailing blank lines left out


def test_a_forged_record_inside_a_fence_stays_in_its_memory(memory_dir: Path) -> None:
    found = Citations(memory_dir).source("bob", "b1", DAY)
    assert found is not None and "still bob" in found.text and found.text.count("tr:event") == 2
    assert "seen again" not in found.text  # the seen line is a record of its own
    alice = Citations(memory_dir).source("alice", "a1", DAY)
    assert alice is not None and "still bob" not in alice.text  # the forgery is no alice record


def test_the_same_id_in_two_namespaces_gives_each_its_own(memory_dir: Path) -> None:
    cite = Citations(memory_dir)
    alice, bob = cite.source("alice", "same", DAY), cite.source("bob", "same", DAY)
    assert alice is not None and bob is not None
    assert "alice's memory" in alice.text and "bob's" not in alice.text
    assert "bob's memory" in bob.text and "alice's" not in bob.text


def test_no_record_or_no_file_is_none(memory_dir: Path) -> None:
    cite = Citations(memory_dir)
    assert cite.source("alice", "b1", DAY) is None  # bob's id read as alice
    assert cite.source("alice", "a1", "2026-11-21") is None  # no such day file


# --- GET /memory/source -----------------------------------------------------------------------
async def test_source_endpoint_returns_the_block_and_its_lines(api: httpx.AsyncClient) -> None:
    r = await api.get("/memory/source", params={"id": "a1", "namespace": "alice"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["path"] == f"memory/daily/{DAY}.md" and body["id"] == "a1"
    lines = TEXT.splitlines()
    assert body["text"] == "\n".join(lines[body["startLine"] - 1:body["endLine"]]) + "\n"
    assert "alice deploys on fridays" in body["text"]


async def test_source_endpoint_is_scoped_by_namespace(api: httpx.AsyncClient) -> None:
    r = await api.get("/memory/source", params={"id": "b1", "namespace": "alice"})
    assert r.status_code == 404 and "bob" not in r.text.replace("'b1'", "")
    default = await api.get("/memory/source", params={"id": "a1"})  # default namespace
    assert default.status_code == 404
    bob = await api.get("/memory/source", params={"id": "same", "namespace": "bob"})
    assert bob.status_code == 200 and "bob's memory" in bob.json()["text"]


async def test_source_endpoint_404_when_not_in_the_log(api: httpx.AsyncClient) -> None:
    r = await api.get("/memory/source", params={"id": "unlogged", "namespace": "alice"})
    assert r.status_code == 404 and f"{DAY}.md" in r.json()["detail"]


async def test_source_endpoint_rejects_bad_namespaces(api: httpx.AsyncClient) -> None:
    r = await api.get("/memory/source", params={"id": "a1", "namespace": "../alice"})
    assert r.status_code == 422


async def test_source_endpoint_needs_the_token(api_with_token: httpx.AsyncClient) -> None:
    params = {"id": "a1", "namespace": "alice"}
    assert (await api_with_token.get("/memory/source", params=params)).status_code == 401
    ok = await api_with_token.get("/memory/source", params=params,
                                  headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


# --- /ui --------------------------------------------------------------------------------------
async def test_the_page_loads_without_the_token_and_holds_no_data(
        api_with_token: httpx.AsyncClient) -> None:
    page = await api_with_token.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="app.js">' in page.text
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    for asset, kind in (("app.js", "javascript"), ("app.css", "text/css"), ("icon.svg", "svg")):
        r = await api_with_token.get(f"/ui/{asset}")
        assert r.status_code == 200 and kind in r.headers["content-type"], asset
        assert "alice" not in r.text and DAY not in r.text
    # The data behind it still needs the token.
    assert (await api_with_token.get("/memory/stats")).status_code == 401


async def test_ui_without_slash_redirects_to_the_page(api: httpx.AsyncClient) -> None:
    r = await api.get("/ui")
    assert r.status_code in (301, 307) and r.headers["location"].endswith("/ui/")


async def test_the_page_fetches_nothing_off_host() -> None:
    """Every URL in the shipped files is relative (the CSP would block others anyway)."""
    ui = Path(__file__).parents[3] / "services/recall-api/totalrecall_recall_api/ui"
    files = sorted(ui.iterdir())
    assert {f.name for f in files} >= {"index.html", "app.js", "app.css"}
    for f in files:
        text = f.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") \
            and "https://" not in text and "//cdn" not in text, f.name


# --- GET /memory/stats: pipeline lag ---------------------------------------------------------
class StatsStore:
    async def stats(self, namespace: str | None) -> dict[str, Any]:
        return {"total": 0}


class Index:
    async def admin(self, request: Any, timeout: float) -> Any:
        raise TimeoutError


class LaggingPublisher:
    async def lag(self) -> dict[str, int | None]:
        return {"embedder": 12, "indexer": None}


@pytest.mark.parametrize(("publisher", "pending"), [
    (LaggingPublisher(), {"embedder": 12, "indexer": None}), (object(), None)])
async def test_stats_report_the_pipelines_pending_events(tmp_path: Path, publisher: object,
                                                         pending: Any) -> None:
    app = create_app(Settings(memory_dir=tmp_path), publisher=publisher,  # type: ignore[arg-type]
                     store=StatsStore(), embedder=object(), index=Index())  # type: ignore[arg-type]
    async with app.router.lifespan_context(app):
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
        body = (await client.get("/memory/stats")).json()
    assert body.get("pending") == pending  # absent when the publisher cannot tell
    assert body["index"] == {"error": "indexer unavailable: TimeoutError"}
