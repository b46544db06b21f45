"""Re-index from Postgres: refill a Zvec tier that was quarantined at open, or check one whose
HNSW build was interrupted (or whose write failed) and add what Zvec lost."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from totalrecall_schema import MemoryEvent

from .embed import EmbedFn, embed_all
from .state import IndexState, StoreUnavailable
from .store_types import TierDoc, TierUnavailable

log = logging.getLogger("totalrecall.indexer")


def _zdoc(row: dict[str, Any], vector: list[float]) -> TierDoc:
    return TierDoc(key=row["key"], vector=vector, namespace=row["namespace"],
                   category=row["category"], subcategory=row["subcategory"],
                   severity=row["severity"], ts_ms=int(row["ts"].timestamp() * 1000),
                   id=row["id"], summary=row["summary"])


class TierReindex:
    def __init__(self, state: IndexState) -> None:
        self.state = state

    async def reindex_tiers(self, embed: EmbedFn | None, chunk: int = 256) -> dict[str, int]:
        """Check every tier `tiers.reindex` lists against Postgres and re-index what Zvec
        lacks, re-embedding the text with the index's model: a tier quarantined at open (started
        empty: all of it), or one whose HNSW build was interrupted or whose write failed (zvec
        may have lost memories: usually none). Concurrent writes are fine: upserts are
        idempotent and each chunk is re-checked against Postgres under the write lock (a memory
        forgotten or promoted meanwhile is not resurrected). Raises StoreUnavailable while the
        embedder is unavailable or the tier's writes are held (call again later)."""
        st = self.state
        done: dict[str, int] = {}
        for tier in list(st.tiers.reindex):
            generation = st.generation
            model = st.tiers.model
            after, n, checked = "", 0, 0
            sample: list[str] = []  # a few of the re-indexed keys, for the log
            started = time.time()
            st.reindex_state[tier] = {"done": 0, "checked": 0, "started_at": started}
            st.check_writable([tier])
            while True:
                rows = await st.pg.tier_page(tier, model, after, chunk)
                if not rows:
                    break
                after = rows[-1]["key"]
                checked += len(rows)
                present = await asyncio.to_thread(st.tiers.present, tier,
                                                  [r["key"] for r in rows])
                rows = [r for r in rows if r["key"] not in present]
                if not rows:
                    st.reindex_state[tier] = {"done": n, "checked": checked,
                                              "started_at": started}
                    continue
                events = [MemoryEvent.model_construct(
                    id=r["id"], namespace=r["namespace"], timestamp=r["ts"],
                    category=r["category"], subcategory=r["subcategory"],
                    summary=r["summary"], detail=r["detail"]) for r in rows]
                vectors, got_model = await embed_all([e.embedding_text() for e in events],
                                                     embed, st.cfg.embed_batch)
                if rows and (vectors[0] is None or got_model != model):
                    why = ("the embedder is unavailable" if vectors[0] is None else
                           f"the embedder's model {got_model!r} is not the index's {model!r}:"
                           " run `totalrecall rebuild`")
                    st.reindex_state[tier]["error"] = why
                    raise StoreUnavailable(f"re-index of {tier}: {why}")
                async with st.write_lock:
                    if st.generation != generation:  # a rebuild replaced everything
                        return done
                    alive = await st.pg.keys_in_tier([r["key"] for r in rows], tier)
                    docs = [_zdoc(r, vec) for r, vec in zip(rows, vectors, strict=True)
                            if r["key"] in alive and vec is not None]
                    try:
                        await asyncio.to_thread(st.tiers.upsert, tier, docs)
                    except TierUnavailable as exc:
                        st.builds_wanted.set()
                        raise StoreUnavailable(str(exc)) from exc
                    except OSError as exc:  # the state disk full (`disk_space`)
                        raise StoreUnavailable(f"re-index of {tier}: {exc}") from exc
                    st.new_since_optimize[tier] += len(docs)
                n += len(docs)
                sample += [d.key for d in docs][: 5 - len(sample)]
                st.metrics.reindexed.labels(tier=tier).inc(len(docs))
                st.reindex_state[tier] = {"done": n, "checked": checked, "started_at": started}
            await asyncio.to_thread(st.tiers.reindexed, tier)
            st.reindex_state.pop(tier, None)
            log.warning("re-indexed tier %s from Postgres: %d of %d memories were missing%s",
                        tier, n, checked, f" (e.g. {', '.join(sample)})" if sample else "")
            done[tier] = n
        await st.refresh_metrics()
        return done
