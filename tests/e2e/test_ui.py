"""The web page at /ui in a real headless Chromium (Debian's `chromium`, driven by the PyPI
`playwright` package; no browser download) against the whole stack: search with score components,
the Markdown source, forget, edit, the timeline, status, and the token prompt.

Screenshots go to $TOTALRECALL_UI_SCREENSHOTS when set (docs/img for the docs: see docs/ui.md),
else to a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from stacklib import Api, api_with_token, wait_for

CHROMIUM = os.environ.get("TOTALRECALL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT_MS = 60_000  # a loaded two-core machine: the first recall of a namespace may be slow
expect.set_options(timeout=TIMEOUT_MS)

Shot = Callable[[Page, str], None]


def _ns() -> str:
    return f"ui-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's package (`apt-get install "
                    "chromium`; scripts/bootstrap.sh does when run as root) or set "
                    "TOTALRECALL_CHROMIUM")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, stack: Api) -> Iterator[Page]:
    """A fresh tab; the test fails on a script error, and on any request that leaves the API's
    origin (the page must fetch nothing else)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    origins: set[str] = set()
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text)
           if m.type == "error" and "Content Security Policy" in m.text else None)
    tab.on("request", lambda r: origins.add("{0.scheme}://{0.netloc}".format(urlsplit(r.url))))
    yield tab
    context.close()
    assert not errors, errors
    assert len(origins) <= 1, f"requests beyond the API's origin: {origins}"


@pytest.fixture(scope="module")
def shots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("TOTALRECALL_UI_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("ui-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def shot(shots_dir: Path) -> Shot:
    def take(page: Page, name: str) -> None:
        page.screenshot(path=shots_dir / f"ui-{name}.png", full_page=True)
        assert (shots_dir / f"ui-{name}.png").stat().st_size > 5_000  # a rendered page, not blank
    return take


def open_ui(page: Page, url: str, ns: str) -> None:
    page.goto(f"{url}/ui/")
    expect(page.locator("body[data-ready]")).to_have_count(1)
    page.fill("#namespace", ns)
    page.press("#namespace", "Tab")  # "change": the page now reads this namespace


def search(page: Page, query: str) -> None:
    page.fill("#query", query)
    page.select_option("#timeframe", "all")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#search-status")).to_contain_text("memories in")


def source_of(stack: Api, memory_id: str, ns: str) -> httpx.Response:
    return httpx.get(f"{stack.url}/memory/source", params={"id": memory_id, "namespace": ns},
                     headers=stack.headers, timeout=30)


def test_search_shows_the_score_components_and_the_markdown_source(
        stack: Api, page: Page, shot: Shot) -> None:
    ns = _ns()
    stack.post("/memory/ingest", [
        {"summary": "postgresql.service failed: port 5432 already in use by a podman container",
         "detail": "journalctl: could not bind IPv4 address 127.0.0.1: Address already in use",
         "category": "system.service", "namespace": ns, "id": "pg-port",
         "metadata": {"severity": "error", "service": "postgresql"}},
        {"summary": "Installed firefox 121 via nix profile", "category": "system.package",
         "namespace": ns},
        {"summary": "The user prefers podman over docker for containers", "actor": "user",
         "category": "user_pattern", "namespace": ns}])
    query = "why did postgresql fail on port 5432?"
    stack.wait_recallable(query, "5432", namespace=ns)
    open_ui(page, stack.url, ns)
    search(page, query)
    hit = page.locator('li.hit[data-id="pg-port"]')
    expect(hit).to_have_count(1)
    expect(hit.locator(".summary")).to_have_text(
        "postgresql.service failed: port 5432 already in use by a podman container")
    # The components shown are the API's own for this query (recency moves by ~1e-6 meanwhile).
    api_hit = next(m for m in stack.recall(query, namespace=ns) if m["id"] == "pg-port")
    scores = api_hit["metadata"]["_scores"]
    assert scores["bm25"] > 0 and scores["vector"] > 0
    for key in ("vector", "bm25", "recency"):
        shown = hit.locator(f'tr[data-component="{key}"] td.num').inner_text()
        assert float(shown) == pytest.approx(scores[key], abs=0.0015), key
    for key in set(scores) - {"vector", "bm25", "recency"}:  # boosts, signed
        shown = hit.locator(f'tr.boost[data-component="{key}"] td.num').inner_text()
        assert float(shown) == pytest.approx(scores[key], abs=0.0015), key
    assert float(hit.locator(".score").inner_text()) == pytest.approx(api_hit["score"], abs=0.0015)
    shot(page, "search")

    hit.get_by_role("button", name="Markdown source").click()
    dialog = page.locator("#source-dialog")
    expect(dialog.locator("pre")).to_contain_text("<!-- tr:event ")
    expect(dialog.locator("pre")).to_contain_text("id `pg-port`")
    expect(dialog.locator("pre")).to_contain_text("could not bind IPv4 address")
    source = source_of(stack, "pg-port", ns).json()
    expect(dialog.locator(".where")).to_have_text(
        f"{source['path']}, lines {source['startLine']}–{source['endLine']}")
    assert dialog.locator("pre").inner_text().strip() == source["text"].strip()
    shot(page, "source")
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()


def test_forget_removes_the_memory_everywhere(stack: Api, page: Page, shot: Shot) -> None:
    ns = _ns()
    stack.post("/memory/ingest", [
        {"summary": "The backup disk /dev/sdb1 is mounted at /mnt/backup", "id": "backup-disk",
         "category": "system.storage", "namespace": ns},
        {"summary": "The backup job runs restic every night at 02:00", "id": "backup-job",
         "category": "system.service", "namespace": ns}])
    query = "where is the backup disk mounted?"
    stack.wait_recallable(query, "/mnt/backup", namespace=ns)
    stack.wait_recallable("when does the backup job run", "restic", namespace=ns)
    assert source_of(stack, "backup-disk", ns).status_code == 200
    open_ui(page, stack.url, ns)
    search(page, query)
    hit = page.locator('li.hit[data-id="backup-disk"]')
    expect(hit).to_have_count(1)
    page.once("dialog", lambda d: d.accept())  # "Forget this memory?"
    hit.get_by_role("button", name="Forget").click()
    expect(page.locator("#search-status")).to_have_text("Forgot backup-disk.")
    expect(hit).to_have_count(0)
    shot(page, "forget")
    # Gone from recall and from the Markdown; the other memory stays.
    wait_for(lambda: all(m["id"] != "backup-disk" for m in stack.recall(query, namespace=ns)),
             60, "the forgotten memory to leave recall")
    assert source_of(stack, "backup-disk", ns).status_code == 404
    assert any(m["id"] == "backup-job" for m in stack.recall("backup job restic", namespace=ns))
    search(page, query)
    expect(page.locator('li.hit[data-id="backup-disk"]')).to_have_count(0)


def test_edit_stores_the_correction_and_forgets_the_old_text(
        stack: Api, page: Page, shot: Shot) -> None:
    ns = _ns()
    stack.post("/memory/ingest", {"summary": "The staging database runs on host db-stage-7",
                                  "id": "staging-db", "category": "conversation",
                                  "subcategory": "note", "namespace": ns, "tags": ["infra"]})
    query = "which host runs the staging database?"
    stack.wait_recallable(query, "db-stage-7", namespace=ns)
    open_ui(page, stack.url, ns)
    search(page, query)
    hit = page.locator('li.hit[data-id="staging-db"]')
    hit.get_by_role("button", name="Edit").click()
    dialog = page.locator("#edit-dialog")
    expect(dialog.locator(".note")).to_contain_text("new memory")
    page.fill("#edit-summary", "The staging database runs on host db-stage-9")
    shot(page, "edit")
    page.click("#edit-save")
    expect(page.locator("#search-status")).to_contain_text("and forgot staging-db.")
    new = stack.wait_recallable(query, "db-stage-9", namespace=ns)
    assert new["id"] != "staging-db" and new["category"] == "conversation"
    assert new["subcategory"] == "note" and new["tags"] == ["infra"]
    assert new["metadata"]["edited_from"] == "staging-db"
    wait_for(lambda: all("db-stage-7" not in m["summary"]
                         for m in stack.recall(query, namespace=ns)), 60, "the old text to go")


def test_timeline_groups_memories_by_day_and_category(stack: Api, page: Page, shot: Shot) -> None:
    ns = _ns()
    now = datetime.now(UTC)
    earlier = now - timedelta(days=2)
    events: list[dict[str, Any]] = [
        {"summary": "nginx.service restarted after a config change", "id": "tl-nginx",
         "category": "system.service", "namespace": ns},
        {"summary": "sshd.service reloaded", "id": "tl-sshd", "category": "system.service",
         "namespace": ns},
        {"summary": "We agreed to move the blog to Hugo", "id": "tl-blog",
         "category": "conversation", "namespace": ns},
        {"summary": "Upgraded the kernel to 6.11", "id": "tl-kernel",
         "category": "system.package", "namespace": ns, "timestamp": earlier.isoformat()}]
    stack.post("/memory/ingest", events)

    def indexed() -> bool:
        r = stack.post("/memory/timeline", {"hours": 168, "namespace": ns})
        return len(r.json()["memories"]) == len(events)
    wait_for(indexed, 60, "the timeline's memories to be indexed")
    open_ui(page, stack.url, ns)
    page.get_by_role("button", name="Timeline").click()
    page.select_option("#tl-hours", "168")
    page.click("#timeline-form button[type=submit]")
    expect(page.locator("#timeline-status")).to_have_text("4 memories on 2 days")
    days = page.locator("section.day")
    expect(days).to_have_count(2)
    # newest day first
    assert days.nth(0).get_attribute("data-day") == f"{now:%Y-%m-%d}"
    assert days.nth(1).get_attribute("data-day") == f"{earlier:%Y-%m-%d}"
    today = days.nth(0)
    expect(today.locator('[data-category="system.service"] .count')).to_have_text("2")
    expect(today.locator('[data-category="conversation"] .count')).to_have_text("1")
    expect(today.locator('[data-category="system.service"] li[data-id="tl-nginx"]')).to_contain_text(
        "nginx.service restarted")
    expect(days.nth(1).locator('[data-category="system.package"] li[data-id="tl-kernel"]')
           ).to_contain_text("Upgraded the kernel")
    shot(page, "timeline")
    # A category filter: only its memories.
    page.fill("#tl-category", "conversation")
    page.click("#timeline-form button[type=submit]")
    expect(page.locator("#timeline-status")).to_have_text("1 memories on 1 days")
    expect(page.locator("section.day li[data-id]")).to_have_count(1)


def test_status_shows_health_tiers_lag_and_alerts(stack: Api, page: Page, shot: Shot) -> None:
    ns = _ns()
    stack.post("/memory/ingest", {"summary": "Status page check memory", "id": "st-1",
                                  "namespace": ns, "category": "system.service"})
    stack.wait_recallable("status page check", "Status page", namespace=ns)
    open_ui(page, stack.url, ns)
    page.get_by_role("button", name="Status").click()
    expect(page.locator("#status-status")).to_contain_text("Updated")
    health = page.locator("#health")
    for part in ("nats", "postgres", "embedder", "indexer"):
        expect(health.get_by_role("cell", name=part, exact=True)).to_have_count(1)
    # The overall state agrees with the parts shown (a loaded machine may be degraded).
    state = health.locator(".state").inner_text()
    not_ok = health.locator("td", has_text="not ok").count()
    assert (state, not_ok > 0) in {("ok", False), ("degraded", True)}, health.inner_text()
    stats = page.locator("#stats")
    expect(stats).to_contain_text(f"1 memories in namespace {ns}")
    expect(stats.get_by_role("cell", name="hot", exact=True)).to_have_count(1)
    for stage in ("embedder", "indexer"):  # pipeline lag: a number, not "unknown"
        row = stats.locator("tr", has=page.get_by_role("cell", name=stage, exact=True))
        assert row.locator("td").nth(1).inner_text().isdigit(), row.inner_text()
    # the alert source answers: a namespace with no machine events has none open
    expect(page.locator("#alerts")).to_contain_text("No open alerts.")
    text = page.locator("#view-status").inner_text()
    assert "null" not in text and "undefined" not in text and "[object" not in text, text
    shot(page, "status")


@pytest.fixture(scope="module")
def token_api(stack: Api) -> Iterator[str]:
    """A second recall API on the same stack that requires a bearer token."""
    if stack.ports is None or stack.home is None:
        pytest.skip("needs a stack this test session launched (its NATS and Postgres ports)")
    with api_with_token(stack, "ui-test-token") as url:
        yield url


def test_the_page_asks_for_the_token_and_sends_it(
        stack: Api, token_api: str, page: Page, shot: Shot) -> None:
    ns = _ns()
    stack.post("/memory/ingest", {"summary": "The NAS answers on 192.168.7.20 port 5000",
                                  "id": "nas", "namespace": ns, "category": "system.network"})
    stack.wait_recallable("what address does the NAS have", "192.168.7.20", namespace=ns)
    page.goto(f"{token_api}/ui/")  # the page itself loads without the token
    form = page.locator("#token-form")
    expect(form).to_be_visible()  # the API refused the page's first call: it asks
    page.fill("#token", "wrong")
    page.click("#token-form button[type=submit]")
    page.fill("#namespace", ns)
    page.press("#namespace", "Tab")
    search_box = page.locator("#query")
    search_box.fill("what address does the NAS have")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#token-status")).to_have_text("That token was refused.")
    shot(page, "token")
    page.fill("#token", "ui-test-token")
    page.click("#token-form button[type=submit]")  # retries the search with the token
    expect(form).to_be_hidden()
    expect(page.locator('li.hit[data-id="nas"]')).to_have_count(1)
    assert page.evaluate("sessionStorage.getItem('totalrecall.token')") == "ui-test-token"
