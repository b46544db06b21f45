"""Rebuild Zvec + Postgres from the Markdown ground truth, outside the running service.

Used by the CLI (`totalrecall rebuild`) while the indexer is stopped (Zvec is single-writer).
When the indexer is running, send `AdminRequest(verb="rebuild")` on `rpc_index_admin` instead
(progress is published on `topology.rpc_index_progress`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ..adapters.nats_clients import nats_embed_fn
from ..container import build_indexer
from ..core.indexer import EmbedFn, ProgressFn
from ..settings import Settings


async def rebuild(settings: Settings | None = None, *, use_embedder: bool = True,
                  embed: EmbedFn | None = None, progress: ProgressFn | None = None,
                  optimize: bool = True) -> dict[str, Any]:
    """Re-create the stores from `<home>/memory/daily/*.md` and `MEMORY.md`.

    Vectors come from `embed` when given, else from the embedder's `rpc_embed_batch` when it is
    reachable (`use_embedder`), else the memories are stored unembedded (keyword search only).
    `progress` receives the job's progress dicts; `optimize` builds the HNSW graphs at the end.
    """
    import nats

    settings = settings or Settings()
    idx = build_indexer(settings)
    idx.on_progress = progress
    await asyncio.to_thread(idx.tiers.open)
    nc = None
    try:
        await asyncio.to_thread(idx.markdown.recover)
        await idx.pg.start()
        await idx.load_tombstones()
        if embed is None and use_embedder:
            try:
                nc = await nats.connect(**settings.nats_connect, connect_timeout=3,
                                        max_reconnect_attempts=1)
                embed = nats_embed_fn(nc, settings)
            except Exception:
                embed = None
        return await idx.rebuild(embed, optimize=optimize)
    finally:
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()
        await idx.pg.close()
        await asyncio.to_thread(idx.tiers.close)


def run_rebuild(settings: Settings | None = None, *, use_embedder: bool = True,
                embed: EmbedFn | None = None, progress: ProgressFn | None = None,
                optimize: bool = True) -> dict[str, Any]:
    """Synchronous wrapper for the CLI."""
    return asyncio.run(rebuild(settings, use_embedder=use_embedder, embed=embed,
                               progress=progress, optimize=optimize))
