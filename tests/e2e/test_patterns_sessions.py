"""Learned user patterns, supersession and session continuity through the whole stack (real NATS,
embedder and model, indexer, Postgres, Zvec), fed with events the real watchers' code made.

Three weeks of a user's workstation (tests/pattern_world.py: logins and logouts from the sessions
watcher, an editor and a build busy on the CPU from the process watcher, the user's own turns)
go in through the API; a pattern refresh learns from what was stored; the profile of every recall
shows the patterns; a stated preference supersedes the learned one; a finished session leaves a
summary that recall finds and that the next session's warm-up brings back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

from pattern_world import World
from stacklib import Api, wait_for


def _ns() -> str:
    return f"pat-{uuid.uuid4().hex[:8]}"


def _stored(stack: Api, ns: str) -> int:
    r = httpx_get(stack, f"/memory/stats?namespace={ns}")
    return int(r["total"])


def httpx_get(stack: Api, path: str) -> dict[str, Any]:
    import httpx

    r = httpx.get(stack.url + path, headers=stack.headers, timeout=30)
    r.raise_for_status()
    return r.json()  # type: ignore[no-any-return]


def _ingest_and_wait(stack: Api, ns: str, events: list[Any]) -> None:
    before = _stored(stack, ns)
    body = [e.model_dump(mode="json") for e in events]
    for i in range(0, len(body), 500):
        r = stack.post("/memory/ingest", body[i : i + 500])
        assert r.status_code == 200, r.text
    wait_for(lambda: _stored(stack, ns) >= before + len(events) or None, 180,
             f"{len(events)} memories of {ns} indexed")


def _profile(stack: Api, ns: str, query: str = "what failed overnight?") -> str:
    r = stack.post("/memory/recall", {"query": query, "namespace": ns, "timeframe": "all"})
    r.raise_for_status()
    return str(r.json()["system_memory"])


def test_patterns_are_learned_shown_and_superseded(stack: Api) -> None:
    ns = _ns()
    events = World(ns).three_weeks()
    _ingest_and_wait(stack, ns, events)
    by_id = {e.id: e for e in events}

    r = stack.post("/memory/patterns/refresh", {"namespace": ns})
    assert r.status_code == 200, r.text
    stored = {p["summary"]: p for p in r.json()["stored"]}
    editor = stored["User prefers neovim as their editor"]
    assert editor["observations"] == 13
    assert editor["evidence"] and all(
        by_id[i].metadata.model_extra["process"] == "nvim"  # type: ignore[index]
        for i in editor["evidence"])
    sessions = next(p for s, p in stored.items() if s.startswith("User's work sessions: "))
    assert {by_id[i].subcategory for i in sessions["evidence"]} == {"login"}
    assert any(s.startswith('User asks: "check the nightly backup report" every Mon')
               for s in stored)

    # Through the pipeline into every recall's <user_profile>.
    def shown() -> str | None:
        text = _profile(stack, ns)
        return text if "User prefers neovim as their editor" in text else None
    block = wait_for(shown, 90, "the learned patterns in the user profile")
    assert "<user_profile>" in block and "User's work sessions: " in block

    # A person replaces the learned preference from the command line: the learned one is
    # superseded (no longer in the profile, nor recalled), the new one is.
    pattern_id = editor["id"]
    cli = subprocess.run([sys.executable, "-m", "totalrecall.main", "supersede", pattern_id,
                          "User now prefers helix as their editor", "--namespace", ns],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TOTALRECALL_API": stack.url,
                              **({"TOTALRECALL_API_TOKEN": stack.token} if stack.token else {})})
    assert cli.returncode == 0, cli.stdout + cli.stderr

    def replaced() -> str | None:
        text = _profile(stack, ns, "which editor does the user prefer?")
        return text if "helix" in text and "prefers neovim" not in text else None
    wait_for(replaced, 90, "the stated preference to supersede the learned one")
    # History still has it.
    history = stack.recall("which editor did the user prefer before?", namespace=ns)
    old = next(m for m in history if m["id"] == pattern_id)
    assert old["metadata"]["superseded_by"]
    # And learning again does not bring it back.
    again = stack.post("/memory/patterns/refresh", {"namespace": ns}).json()["stored"]
    assert not any("editor" in p["summary"] for p in again)


def test_a_finished_session_is_summarised_and_the_next_one_starts_with_it(stack: Api) -> None:
    ns = _ns()
    marker = uuid.uuid4().hex[:8]
    if stack.home is not None:  # the curated MEMORY.md, when this run launched the stack
        (stack.home / "memory").mkdir(parents=True, exist_ok=True)
        (stack.home / "memory" / "MEMORY.md").write_text(
            f"# Memory\n- The NAS {marker} is backed up nightly at 02:00\n")
    session = f"sess-{marker}"
    messages = [
        {"role": "user", "content": f"The nightly backup to the NAS {marker} failed again. "
                                    "Can you check the rsync logs?"},
        {"role": "assistant", "content": "The rsync logs show exit code 23: permission denied "
                                         "on /srv/photos."},
        {"role": "user", "content": "Then fix the permissions please."},
        {"role": "assistant", "content": "Fixed: I ran `chown -R backup /srv/photos` and the "
                                         "backup went through. We decided to alert on rsync "
                                         "exit codes from now on."}]
    # The turns as the plugin's auto-capture stores them.
    r = stack.post("/memory/flush", {"sessionId": session, "namespace": ns, "messages": messages})
    assert r.status_code == 200 and r.json()["accepted"] == 4, r.text
    # The turns and what they concluded (the fix), each a memory.
    n = 4 + len(r.json()["derived"])
    wait_for(lambda: _stored(stack, ns) >= n or None, 90, "the session's turns indexed")

    end = stack.post("/memory/session/end", {"sessionId": session, "namespace": ns})
    assert end.status_code == 200 and end.json()["stored"], end.text
    summary = end.json()
    assert summary["summary"].startswith("Session summary (4 turns, 2 by the user): The nightly "
                                         f"backup to the NAS {marker} failed again.")
    hit = stack.wait_recallable("what did we do about the NAS backup last time?",
                                "Session summary", namespace=ns)
    assert hit["id"] == summary["id"] and hit["subcategory"] == "session_summary"

    warm = stack.post("/memory/warm", {"sessionId": f"next-{marker}", "namespace": ns,
                                       "namespaces": [ns, "default"]}).json()
    assert warm["warmed"]["embedder"] and warm["warmed"]["postgres"], warm
    assert warm["bundle"]["last_session"]["id"] == summary["id"]
    text = warm["session_context"]
    assert text.startswith("<session_context>") and f"NAS {marker} failed again" in text
    if stack.home is not None:
        assert f"The NAS {marker} is backed up nightly" in text
