"""The admin verbs (`rpc_index_admin`): stats, compact, forget, rebuild."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from totalrecall_schema import AdminReply, AdminRequest

from .embed import EmbedFn
from .forget import Forgetting
from .maintenance import TierMaintenance
from .memory_md_sync import MemoryMdSync
from .rebuild import Rebuild
from .state import IndexState, StoreUnavailable

log = logging.getLogger("totalrecall.indexer")


class Admin:
    def __init__(self, state: IndexState, maintenance: TierMaintenance, forgetting: Forgetting,
                 rebuild: Rebuild, memory_md: MemoryMdSync) -> None:
        self.state = state
        self.maintenance = maintenance
        self.forgetting = forgetting
        self.rebuild = rebuild
        self.memory_md = memory_md

    async def stats(self) -> dict[str, Any]:
        st = self.state
        tiers = await asyncio.to_thread(st.tiers.stats)
        progress = self.rebuild.progress
        out: dict[str, Any] = {
            "tiers": tiers,
            "docs": {t: int(s["doc_count"]) for t, s in tiers.items()},
            "index_completeness": {t: s["index_completeness"] for t, s in tiers.items()},
            "model": st.tiers.model,
            "dim": st.tiers.dim,
            "markdown_days": len(await asyncio.to_thread(st.markdown.days)),
            "last_compaction": self.maintenance.last_compaction,
            "memory_md": dict(self.memory_md.status),
            "rebuild": dict(progress) if progress else None,
            "reindex": {t: {"reason": why, **st.reindex_state.get(t, {})}
                        for t, why in st.tiers.reindex.items()},
            "writes_held": dict(st.tiers.held),
            "builds": self.maintenance.builds(tiers),
        }
        try:
            out["pg_count"] = await st.pg.count()
            out["pg_by_tier"] = await st.pg.counts_by_tier()
        except Exception as exc:
            out["pg_count"] = None
            out["pg_error"] = str(exc)
        st.metrics.set_tier_stats(tiers)
        if out["pg_count"] is not None:
            st.metrics.pg_rows.set(out["pg_count"])
        return out

    async def admin(self, req: AdminRequest, embed: EmbedFn | None = None) -> AdminReply:
        try:
            if req.verb == "stats":
                return AdminReply(result=await self.stats())
            if req.verb == "compact":
                moved = await self.maintenance.compact()
                optimized = await self.maintenance.optimize_once()
                return AdminReply(result={"moved": moved, "optimized": optimized})
            if req.verb == "forget":
                if not req.keys:
                    return AdminReply(ok=False, error="forget needs keys")
                return AdminReply(result=await self.forgetting.forget(req.keys, req.namespace))
            if req.verb == "rebuild":
                if self.rebuild.running:
                    return AdminReply(ok=False, error="a rebuild is already running",
                                      result={"progress": self.rebuild.progress})
                return AdminReply(result=await self.rebuild.rebuild(embed))
        except StoreUnavailable as exc:
            return AdminReply(ok=False, error=str(exc))
        except Exception as exc:
            log.exception("admin %s failed", req.verb)
            return AdminReply(ok=False, error=f"{type(exc).__name__}: {exc}")
        return AdminReply(ok=False, error=f"unknown verb {req.verb!r}")
