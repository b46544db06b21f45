"""MEMORY.md indexed by the running indexer: at startup, on change (mtime poll), deletions removed,
pinned to the hot tier, embedded through `rpc_embed_batch`, retried when the embedder comes back,
restored by a rebuild."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
from indexer_it_helpers import MODEL, Harness, make_event, running, unit_vectors, wait_for
from totalrecall_indexer.settings import Settings
from totalrecall_schema import (
    EmbedReply,
    EmbedRequest,
    MemoryEvent,
    VectorFilter,
    VectorSearchReply,
    VectorSearchRequest,
)
from totalrecall_schema.memory_md import parse_memory_md

DIM = 384
V1 = """# Memory

## Preferences
- Prefers podman over docker for containers.
- Editor: helix; never suggest vim keybindings.

## Known problems
- Wi-Fi drops after suspend: `systemctl restart iwd` fixes it.

## Ops
<!-- namespace: ops -->
- Backups run at 02:00 via restic.
"""
V2 = """# Memory

## Preferences
- Prefers podman over docker for containers.
- Uses fish as the login shell.

## Known problems
- Wi-Fi drops after suspend: `systemctl restart iwd` fixes it.
  Since kernel 6.8 also `rfkill unblock all`.
"""


def text_vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).normal(size=DIM)
    return [float(x) for x in v / np.linalg.norm(v)]


async def fake_embedder(h: Harness) -> tuple[Any, list[int]]:
    calls: list[int] = []

    async def cb(msg: Any) -> None:
        req = EmbedRequest.model_validate_json(msg.data)
        calls.append(len(req.texts))
        reply = EmbedReply(vectors=[text_vector(t) for t in req.texts], model=MODEL, dim=DIM)
        await msg.respond(reply.model_dump_json().encode())

    return await h.nc.subscribe(h.topology.rpc_embed_batch, cb=cb), calls


async def md_rows(dsn: str) -> dict[str, asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT * FROM memories WHERE source = 'MEMORY.md'")
    finally:
        await conn.close()
    return {r["key"]: r for r in rows}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    st = path.stat()  # make sure the mtime moves even within one clock tick
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def embedding_text(e: Any) -> str:
    return MemoryEvent(id=e.id, summary=e.summary, detail=e.detail).embedding_text()


async def search(h: Harness, vec: list[float], namespace: str = "default",
                 tiers: list[str] | None = None) -> VectorSearchReply:
    req = VectorSearchRequest(vector=vec, model=MODEL, topk=5, tiers=tiers or ["hot"],
                              filter=VectorFilter(namespace=namespace))
    return VectorSearchReply.model_validate_json(
        await h.request(h.topology.rpc_vector_search, req, timeout=10))


async def test_memory_md_indexed_updated_and_removed(settings: Settings,
                                                     harness: Harness) -> None:
    settings = settings.model_copy(update={"memory_md_poll_s": 0.1})
    path = settings.memory_dir / "MEMORY.md"
    write(path, V1)
    v1 = parse_memory_md(V1)
    sub, calls = await fake_embedder(harness)
    async with running(settings) as app:
        idx = app.indexer

        async def synced(want: set[str]) -> bool:
            rows = await md_rows(settings.pg_dsn)
            return set(rows) == want and all(r["embedded"] for r in rows.values())

        await wait_for(lambda: synced({e.key for e in v1}), what="MEMORY.md v1 indexed")
        rows = await md_rows(settings.pg_dsn)
        by_summary = {r["summary"]: r for r in rows.values()}
        podman = by_summary["Prefers podman over docker for containers."]
        assert (podman["category"], podman["subcategory"]) == ("user_pattern", "preference")
        assert podman["source"] == "MEMORY.md" and podman["tier"] == "hot"
        assert podman["namespace"] == "default" and "memory.md" in podman["tags"]
        wifi = by_summary["Wi-Fi drops after suspend: `systemctl restart iwd` fixes it."]
        assert wifi["category"] == "diagnosis"
        assert by_summary["Backups run at 02:00 via restic."]["namespace"] == "ops"
        assert idx.tiers.stats()["hot"]["doc_count"] == len(v1)
        assert sum(calls) == len(v1)
        # searchable by meaning (here: the vector of its text), namespace respected
        rep = await search(harness, text_vector(embedding_text(v1[0])))
        assert rep.hits[0].key == v1[0].key and rep.hits[0].score > 0.99
        rep = await search(harness, text_vector(embedding_text(v1[3])), namespace="ops")
        assert [h.key for h in rep.hits] == [v1[3].key]
        # nothing went to the daily logs: MEMORY.md is its own ground truth
        assert not (settings.memory_dir / "daily").exists()

        # edit: one bullet removed, one added, one changed (= replaced), a section dropped
        calls.clear()
        ts_podman = podman["ts"]
        write(path, V2)
        v2 = parse_memory_md(V2)
        await wait_for(lambda: synced({e.key for e in v2}), what="MEMORY.md v2 synced")
        assert sum(calls) == 2  # only the new and the changed bullet were embedded
        rows = await md_rows(settings.pg_dsn)
        assert rows[v2[0].key]["ts"] == ts_podman  # unchanged memory untouched
        assert idx.tiers.stats()["hot"]["doc_count"] == len(v2)
        gone = {e.key for e in v1} - {e.key for e in v2}
        assert len(gone) == 3
        assert not idx.tiers.fetch("hot", list(gone))
        rep = await search(harness, text_vector(embedding_text(v1[3])), namespace="ops")
        assert rep.hits == []
        st = await idx.stats()
        assert st["memory_md"]["entries"] == 3

        # evergreen: compaction leaves MEMORY.md memories in the hot tier
        old = make_event(1, unit_vectors(1, seed=3)[0])
        await idx.index_batch([old])
        moved = await idx.compact(now_ms=int(time.time() * 1000) + 3 * 86_400_000)
        assert moved["hot->warm"] == 1
        assert set(idx.tiers.fetch("hot", [e.key for e in v2])) == {e.key for e in v2}
        assert idx.tiers.fetch("warm", [old.event.key])

        # the file deleted: its memories go
        path.unlink()
        await wait_for(lambda: synced(set()), what="MEMORY.md removed")
        assert idx.tiers.stats()["hot"]["doc_count"] == 0
    await sub.unsubscribe()


async def test_memory_md_waits_for_the_embedder_and_survives_rebuild(
        settings: Settings, harness: Harness) -> None:
    settings = settings.model_copy(update={"memory_md_poll_s": 0.1, "memory_md_retry_s": 0.3})
    write(settings.memory_dir / "MEMORY.md", V2)
    v2 = parse_memory_md(V2)
    keys = {e.key for e in v2}
    async with running(settings) as app:
        idx = app.indexer

        async def rows_state() -> dict[str, bool]:
            return {k: r["embedded"] for k, r in (await md_rows(settings.pg_dsn)).items()}

        # no embedder yet: stored keyword-searchable, without vectors
        await wait_for(lambda: _eq(rows_state(), dict.fromkeys(keys, False)),
                       what="unembedded rows")
        sub, _calls = await fake_embedder(harness)
        await wait_for(lambda: _eq(rows_state(), dict.fromkeys(keys, True)),
                       what="embedded after the embedder came back")
        assert idx.tiers.stats()["hot"]["doc_count"] == len(v2)

        # a rebuild from the Markdown ground truth keeps MEMORY.md (it is ground truth too)
        rep = await idx.rebuild(idx_embed(harness))
        assert rep["memory_md"]["entries"] == len(v2)
        await wait_for(lambda: _eq(rows_state(), dict.fromkeys(keys, True)), what="rebuilt")
        hits = await search(harness, text_vector(embedding_text(v2[1])))
        assert hits.hits[0].key == v2[1].key
        await sub.unsubscribe()


def idx_embed(h: Harness) -> Any:
    async def embed(texts: list[str]) -> EmbedReply:
        return EmbedReply(vectors=[text_vector(t) for t in texts], model=MODEL, dim=DIM)

    return embed


async def _eq(coro: Any, want: Any) -> bool:
    return bool((await coro) == want)
