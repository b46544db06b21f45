"""The indexer's background loops: compaction, HNSW builds, held builds, re-indexing and
MEMORY.md sync. Each runs until cancelled at shutdown and survives its own failures."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..adapters.nats_clients import refresh_runtime_gauges
from ..container import Container
from ..core.indexer import StoreUnavailable

log = logging.getLogger("totalrecall.indexer")


async def compact_loop(c: Container) -> None:
    s, idx = c.settings, c.indexer
    delay = min(60.0, s.compact_interval_s)  # first pass soon after a (re)start
    while True:
        await asyncio.sleep(delay)
        delay = s.compact_interval_s
        try:
            moved = await idx.compact()
            if any(moved.values()):
                log.info("compaction moved %s", moved)
        except Exception:
            log.exception("compaction failed")


async def optimize_loop(c: Container) -> None:
    s, idx = c.settings, c.indexer
    while True:
        await asyncio.sleep(s.optimize_interval_s)
        try:
            done = await idx.optimize_once()
            if done:
                log.info("HNSW built: %s", done)
        except Exception:
            log.exception("optimize failed")


async def vacuum_loop(c: Container) -> None:
    """The Postgres mirror's vacuum (and, as it grows, its statistics): see
    `PgStore.vacuum_if_grown`."""
    s, idx = c.settings, c.indexer
    while True:
        await asyncio.sleep(s.vacuum_interval_s)
        try:
            grown = await idx.pg.vacuum_if_grown(s.vacuum_min_new_rows)
            if grown:
                log.debug("vacuumed the Postgres mirror after %d inserts", grown)
        except Exception:
            log.exception("vacuum failed")


async def memory_md_loop(c: Container) -> None:
    """Index MEMORY.md at startup, then whenever it changes (mtime poll)."""
    s, idx = c.settings, c.indexer
    force = True
    while True:
        try:
            if force or idx.memory_md_due():
                await idx.sync_memory_md(c.embed, force=force)
                force = False
        except Exception:
            log.exception("MEMORY.md sync failed")
        await asyncio.sleep(s.memory_md_poll_s if not force else s.retry_delay_s)


async def reindex_loop(c: Container) -> None:
    """Re-index the tiers `tiers.reindex` lists; retried while the embedder is unavailable or
    the tier's writes are held (its interrupted build is being completed)."""
    s, idx = c.settings, c.indexer
    while True:
        if not idx.tiers.reindex:
            await idx.reindex_wanted.wait()
        idx.reindex_wanted.clear()
        try:
            await idx.reindex_tiers(c.embed)
        except StoreUnavailable as exc:
            # Sooner while it waits for a build or for space; the embedder may take longer.
            delay = (s.retry_delay_s if idx.tiers.held or idx.tiers.space.low()
                     else s.memory_md_retry_s)
            log.warning("%s; retrying in %.0fs", exc, delay)
            with contextlib.suppress(TimeoutError):  # or as soon as a held build completed
                await asyncio.wait_for(idx.reindex_wanted.wait(), timeout=delay)
        except Exception:
            log.exception("re-index failed; retrying")
            await asyncio.sleep(s.memory_md_retry_s)


async def reconcile_once(c: Container) -> str:
    """One check of Zvec against Postgres (`core/reconcile.py`); its outcome."""
    try:
        return str((await c.indexer.reconcile())["outcome"])
    except Exception:
        log.exception("the consistency check of zvec against postgres failed; retrying")
        return "failed"


async def reconcile_loop(c: Container) -> None:
    """The check every `reconcile_interval_s` after the one at start (0: no more once one
    found Zvec consistent); one that could not run (events in flight, a tier being repaired, a
    build running), or that repaired something, is run again after `retry_delay_s`."""
    s, idx = c.settings, c.indexer
    last = idx.reconciler.last
    outcome = "skipped" if last is None else str(last["outcome"])
    while True:
        if outcome in ("skipped", "failed", "repaired"):
            await asyncio.sleep(s.retry_delay_s)
        elif s.reconcile_interval_s > 0:
            await asyncio.sleep(s.reconcile_interval_s)
        else:
            return
        outcome = await reconcile_once(c)


async def held_builds_loop(c: Container) -> None:
    """Complete the HNSW build of every tier whose writes are held, whenever there is one."""
    idx = c.indexer
    while True:
        if not idx.tiers.held:
            await idx.builds_wanted.wait()
        idx.builds_wanted.clear()
        try:
            await idx.finish_held_builds()
        except Exception:
            log.exception("HNSW build of a tier with held writes failed; retrying")
            await asyncio.sleep(c.settings.retry_delay_s)


async def refresh_gauges(c: Container) -> None:
    """The runtime gauges, and the stores' (skipped while a rebuild refills them)."""
    await refresh_runtime_gauges(c.nc, c.settings, c.metrics)
    if not c.indexer.rebuilding:
        await c.indexer.refresh_metrics()
