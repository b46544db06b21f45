"""A real log imported into the memory: every line kept, found by its identifier, and rebuilt.

2,000 HDFS lines (LogHub, tests/data/logs/) through `POST /memory/ingest`, one memory per line, as
a log importer sends them. Most lines are one template with another block id ("PacketResponder 1
for block blk_… terminating"): none may be folded into another, each must come first when its
block id is asked for, the Markdown ground truth must hold every block id and IP, and a rebuild
from that Markdown must give the same answers.
"""

from __future__ import annotations

import csv
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from stacklib import Api, wait_for

DATA = Path(__file__).resolve().parents[1] / "data" / "logs" / "HDFS_2k.log_structured.csv"
_BLOCK = re.compile(r"blk_-?\d+")
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")


def _lines() -> list[dict[str, Any]]:
    """The log as importer events: `<Level> <Component>[<Pid>]: <Content>`, the line's time."""
    out = []
    with DATA.open(newline="") as f:
        for row in csv.DictReader(f):
            ts = datetime.strptime(row["Date"] + row["Time"], "%y%m%d%H%M%S").replace(tzinfo=UTC)
            text = f"{row['Level']} {row['Component']}[{row['Pid']}]: {row['Content']}"
            # A long line (a NameNode listing dozens of blocks): its head as the summary, the
            # whole line as the detail.
            summary, detail = (text, "") if len(text) <= 1000 else (text[:999] + "…", text)
            out.append({
                "id": f"hdfs-{int(row['LineId']):04d}", "timestamp": ts.isoformat(),
                "category": "system.service", "source": "journal",
                "summary": summary, "detail": detail,
                "metadata": {"service": row["Component"], "pid": int(row["Pid"])},
                "content": row["Content"]})
    return out


def _ask_by_block(stack: Api, ns: str, lines: list[dict[str, Any]]) -> dict[str, list[str]]:
    """For each line, the ids of the memories recalled by the question naming its block id."""
    answers: dict[str, list[str]] = {}
    with httpx.Client(base_url=stack.url, headers=stack.headers, timeout=60) as client:
        for line in lines:
            block = _BLOCK.findall(line["content"])[0]
            r = client.post("/memory/recall", json={
                "query": f"what happened to block {block}?", "namespace": ns,
                "timeframe": "all", "maxResults": 5})
            r.raise_for_status()
            answers[line["id"]] = [m["id"] for m in r.json()["memories"]]
    return answers


def _misplaced(lines: list[dict[str, Any]], answers: dict[str, list[str]],
               log: list[dict[str, Any]] | None = None) -> list[str]:
    """Lines not recalled first by their block id (within the lines of `log` sharing it)."""
    sharing: dict[str, set[str]] = {}
    for line in log or lines:
        for block in set(_BLOCK.findall(line["content"])):
            sharing.setdefault(block, set()).add(line["id"])
    bad = []
    for line in lines:
        block = _BLOCK.findall(line["content"])[0]
        rivals = len(sharing[block])
        if line["id"] not in answers[line["id"]][:rivals]:
            bad.append(f"{line['id']} ({block}): got {answers[line['id']][:rivals]}")
    return bad


def test_every_log_line_is_kept_and_found_by_its_block_id(stack: Api) -> None:
    ns = f"hdfs-{uuid.uuid4().hex[:8]}"
    lines = _lines()
    assert len(lines) == 2000
    for i in range(0, len(lines), 250):
        batch = [{k: v for k, v in line.items() if k != "content"} | {"namespace": ns}
                 for line in lines[i:i + 250]]
        r = stack.post("/memory/ingest", batch)
        assert r.status_code == 200, r.text

    def stored() -> int | None:
        total = httpx.get(f"{stack.url}/memory/stats", params={"namespace": ns},
                          headers=stack.headers, timeout=30).json()["total"]
        return total if total == len(lines) else None

    # Not one line folded into another: 2,000 lines, 2,000 memories.
    wait_for(stored, 600, "2,000 memories in the store", every=2.0)

    # The Markdown ground truth holds every line's identifiers.
    if stack.home is not None:
        markdown = "".join(p.read_text() for p in (stack.home / "memory" / "daily").glob("2008-11-*.md"))
        for line in lines:
            for ident in [*_BLOCK.findall(line["content"]), *_IP.findall(line["content"])]:
                assert ident in markdown, f"{ident} of {line['id']} is not in the Markdown"

    answers = _ask_by_block(stack, ns, lines)
    assert _misplaced(lines, answers) == []

    # A rebuild from the Markdown gives the same answers.
    r = httpx.post(f"{stack.url}/memory/rebuild", json={}, headers=stack.headers, timeout=900)
    assert r.status_code == 200 and r.json()["ok"], r.text
    wait_for(stored, 600, "2,000 memories after the rebuild", every=2.0)
    sample = lines[::10]
    again = _ask_by_block(stack, ns, sample)
    assert _misplaced(sample, again, lines) == []
    assert {k: v[:1] for k, v in again.items()} == {k: answers[k][:1] for k in again}
