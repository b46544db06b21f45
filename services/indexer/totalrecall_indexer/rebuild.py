"""Rebuild Zvec + Postgres from the Markdown daily logs, outside the running service.

Used by the CLI (`totalrecall rebuild`) while the indexer is stopped (Zvec is single-writer).
When the indexer is running, send `AdminRequest(verb="rebuild")` on `rpc_index_admin` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .app import build_indexer, nats_embed_fn
from .settings import Settings


async def rebuild(settings: Settings | None = None, *, use_embedder: bool = True) -> dict[str, Any]:
    """Re-create the stores from `<home>/memory/daily/*.md`; re-embeds through the embedder's
    `rpc_embed_batch` when reachable, else stores the memories unembedded."""
    import nats

    settings = settings or Settings()
    idx = build_indexer(settings)
    await asyncio.to_thread(idx.tiers.open)
    nc = None
    try:
        await idx.pg.start()
        embed = None
        if use_embedder:
            try:
                nc = await nats.connect(settings.nats_url, connect_timeout=3,
                                        max_reconnect_attempts=1)
                embed = nats_embed_fn(nc, settings)
            except Exception:
                embed = None
        result = await idx.rebuild(embed)
        result["optimized"] = await idx.optimize_once(force=True)
        return result
    finally:
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()
        await idx.pg.close()
        await asyncio.to_thread(idx.tiers.close)


def run_rebuild(settings: Settings | None = None, *, use_embedder: bool = True) -> dict[str, Any]:
    """Synchronous wrapper for the CLI."""
    return asyncio.run(rebuild(settings, use_embedder=use_embedder))
