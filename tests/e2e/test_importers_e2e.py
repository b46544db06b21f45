"""`totalrecall import` end to end: each source's fixture (tests/data/importers/) imported through
the real stack by the real command, twice. The second run sends the same events again and the
store does not grow; an imported memory is recalled by its words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from stacklib import Api, wait_for

DATA = Path(__file__).resolve().parents[1] / "data" / "importers"
SOURCES: dict[str, list[Path]] = {
    "openclaw": [DATA / "openclaw"],
    "claude-code": [DATA / "claude-code"],
    "shell": [DATA / "shell" / "bash_history", DATA / "shell" / "zsh_history",
              DATA / "shell" / "fish_history"],
    "journal": [DATA / "journal" / "journal.json"],
    "logs": [DATA / "logs" / "app.log"],
}
#: A question per source and a word of the memory that answers it.
QUESTIONS = {
    "openclaw": ("why could the grafana container not write its volume?", "--userns=keep-id"),
    "claude-code": ("why was the websocket reconnect test flaky?", "heartbeat timer"),
    "shell": ("how did I back up the photos to the NAS?", "rsync -av ~/photos"),
    "journal": ("why did postgres fail to bind its address?", "Address already in use"),
    "logs": ("which user tried to log in from 173.234.31.186?", "webmaster"),
}


def _import(stack: Api, source: str, ns: str) -> dict[str, Any]:
    env = {**os.environ, "TOTALRECALL_API": stack.url}
    if stack.token:
        env["TOTALRECALL_API_TOKEN"] = stack.token
    r = subprocess.run([sys.executable, "-m", "totalrecall.main", "import", source,
                        *map(str, SOURCES[source]), "--namespace", ns, "--json"],
                       env=env, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    summary: dict[str, Any] = json.loads(r.stdout)
    return summary


def _total(stack: Api, ns: str) -> int:
    stats = httpx.get(f"{stack.url}/memory/stats", params={"namespace": ns},
                      headers=stack.headers, timeout=30).json()
    return int(stats["total"])


def test_each_importer_twice_stores_each_record_once_and_it_is_recalled(stack: Api) -> None:
    run = uuid.uuid4().hex[:8]
    namespaces = {source: f"imp-{run}-{source}" for source in SOURCES}
    first = {source: _import(stack, source, ns) for source, ns in namespaces.items()}
    for source, ns in namespaces.items():
        summary = first[source]
        assert summary["error"] is None and summary["sent"] == summary["events"] > 0, summary
        wait_for(lambda ns=ns, n=summary["events"]: _total(stack, ns) == n, 240,
                 f"{summary['events']} {source} memories in the store")

    second = {source: _import(stack, source, ns) for source, ns in namespaces.items()}
    for source, ns in namespaces.items():
        assert second[source]["sent"] == first[source]["sent"], second[source]
        # A fresh memory after the re-import: once it is stored, the re-sent events before it
        # went through the pipeline too (one stream, in order), and the count says what they did.
        r = stack.post("/memory/ingest", {"summary": f"sentinel after the re-import {run}",
                                          "namespace": ns})
        assert r.status_code == 200, r.text
        expected = first[source]["events"] + 1
        wait_for(lambda ns=ns, n=expected: _total(stack, ns) >= n, 240, f"the {source} sentinel")
        assert _total(stack, ns) == expected, f"{source}: the re-import added memories"

    for source, (question, marker) in QUESTIONS.items():
        hit = stack.wait_recallable(question, marker, namespace=namespaces[source])
        assert hit["summary"], source
