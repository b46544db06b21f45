"""Asking the embedder for vectors: the indexer never talks to it directly but through an
`EmbedFn` (the app sends `rpc_embed_batch` over NATS; the offline rebuild may pass its own)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from totalrecall_schema import EmbedReply

log = logging.getLogger("totalrecall.indexer")

#: texts -> EmbedReply, or None when the embedder is unavailable.
EmbedFn = Callable[[list[str]], Awaitable[EmbedReply | None]]


async def embed_all(texts: list[str], embed: EmbedFn | None, batch: int
                    ) -> tuple[list[list[float] | None], str | None]:
    """Vectors for `texts` (None for all when the embedder is unavailable) and the model."""
    if not texts:
        return [], None
    if embed is None:
        return [None] * len(texts), None
    out: list[list[float] | None] = []
    model: str | None = None
    for i in range(0, len(texts), max(1, batch)):
        part = texts[i: i + max(1, batch)]
        try:
            reply = await embed(part)
        except Exception as exc:
            log.warning("embedder failed for MEMORY.md: %s", exc)
            reply = None
        if (reply is None or reply.error or reply.vectors is None
                or len(reply.vectors) != len(part) or (model and reply.model != model)):
            return [None] * len(texts), None
        model = reply.model
        out.extend(reply.vectors)
    return out, model
