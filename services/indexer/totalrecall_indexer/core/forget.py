"""Forgetting: memories removed from every store on request, with a tombstone so that no later
write brings them back; and the plain removal of memories from the indexes (MEMORY.md entries
that left the file)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from .search import TIERS
from .state import IndexState


class Forgetting:
    def __init__(self, state: IndexState) -> None:
        self.state = state

    async def load_tombstones(self) -> None:
        """Read the forgotten keys from Postgres (at startup, after `pg.start`)."""
        self.state.forgotten = await self.state.pg.tombstones()

    async def remove_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """Delete memories from Postgres and every Zvec tier (not from the daily logs)."""
        st = self.state
        keys = list(dict.fromkeys(keys))
        async with st.write_lock:
            st.check_writable(TIERS)  # before Postgres: all stores or none
            deleted = await st.pg.delete(keys)
            zvec_deleted = 0
            for tier in TIERS:
                zvec_deleted += await asyncio.to_thread(st.tiers.delete, tier, keys)
        return {"postgres": len(deleted), "zvec": zvec_deleted}

    async def forget(self, keys: Sequence[str], namespace: str | None = None) -> dict[str, Any]:
        """Forget memories everywhere: Postgres, every Zvec tier, the Markdown daily logs (an
        audit line replaces them), and record a tombstone first so that no later write brings
        them back (see `IndexState.forgotten`). With `namespace`, keys stored under another
        namespace are left alone; keys stored nowhere yet (still in the pipeline) are
        tombstoned too. Result: `forgotten` (how many were found and removed), `found` (their
        keys)."""
        st = self.state
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {"forgotten": 0, "found": []}
        async with st.write_lock:
            st.check_writable(TIERS)  # before Postgres: all stores or none
            owners = await st.pg.namespaces_of(keys)
            if namespace is not None:
                keys = [k for k in keys if owners.get(k, namespace) == namespace]
            if not keys:
                return {"forgotten": 0, "found": []}
            when = await st.pg.timestamps(keys)
            # The tombstone is durable before anything is deleted: a crash in between leaves a
            # memory that a retried forget removes, never one that comes back.
            await st.pg.add_tombstones(keys, namespace)
            st.forgotten.update(keys)
            deleted_pg = await st.pg.delete(keys)
            zvec_deleted = 0
            for tier in TIERS:
                zvec_deleted += await asyncio.to_thread(st.tiers.delete, tier, keys)
            reason = f"forget requested for {len(keys)} key(s)"
            known = [k for k in keys if k in when]
            md = await asyncio.to_thread(st.markdown.forget_keys, known,
                                         {ts.astimezone(UTC).date() for ts in when.values()},
                                         reason) if known else {}
        unknown = [k for k in keys if k not in when]
        if unknown:
            # Keys Postgres does not know may still have a record in some daily file (written
            # there while Postgres failed, before the forget): search every file, outside the
            # write lock (the tombstones already keep new records of them out), so a long
            # search does not stall ingest.
            for day, gone in (await asyncio.to_thread(st.markdown.forget_keys, unknown, None,
                                                      reason)).items():
                md[day] = md.get(day, []) + gone
        await st.refresh_metrics()
        found = set(deleted_pg).union(*md.values())
        return {"forgotten": len(found), "found": [k for k in keys if k in found],
                "postgres": len(deleted_pg), "zvec": zvec_deleted,
                "markdown": {day: len(gone) for day, gone in md.items()}}
