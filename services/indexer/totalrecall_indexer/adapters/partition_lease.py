"""One writer per partition, enforced: an indexer reads a partition's consumer only while it
holds the partition's lease, a key in a NATS key-value bucket (`Topology.partition_owners_bucket`,
kept on the streams' replicas) whose entries expire `lease_s` after their last renewal.

- At start an indexer takes each partition it owns: the key is created if absent (or expired),
  taken over if it already names this indexer (a restart: its owner id is its host and home), and
  waited for otherwise: a second indexer configured with the same partition waits, and takes over
  once the first has been gone `lease_s`.
- It renews every `lease_s / 3` with a compare-and-set on the revision it holds. A renewal that
  finds another revision (another owner took the key) means it is no longer the writer: the
  process exits (70, for its supervisor) before it writes anything more.
- A clean stop deletes its keys: the next owner need not wait.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from nats.js.errors import (
    BadRequestError,
    BucketNotFoundError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
)
from totalrecall_schema import Topology
from totalrecall_worker import exit_process

log = logging.getLogger("totalrecall.indexer.lease")


class LeaseLost(RuntimeError):
    """Another indexer holds a partition this one was writing."""


def _key(partition: int) -> str:
    return f"p{partition}"


class PartitionLeases:
    def __init__(self, js: Any, topology: Topology, partitions: tuple[int, ...], owner: str,
                 lease_s: float) -> None:
        self.js, self.topology, self.partitions = js, topology, partitions
        self.owner, self.lease_s = owner, lease_s
        self.kv: Any = None
        #: partition -> the revision of its key this indexer wrote last
        self.held: dict[int, int] = {}
        #: partition -> the owner it waits for
        self.waiting: dict[int, str] = {}

    async def _bucket(self) -> Any:
        if self.kv is None:
            from nats.js.api import KeyValueConfig, StorageType

            name = self.topology.partition_owners_bucket
            try:
                self.kv = await self.js.key_value(name)
            except BucketNotFoundError:
                try:
                    self.kv = await self.js.create_key_value(KeyValueConfig(
                        bucket=name, history=1, ttl=self.lease_s, storage=StorageType.FILE,
                        replicas=self.topology.replicas))
                except BadRequestError:  # another indexer made it meanwhile
                    self.kv = await self.js.key_value(name)
        return self.kv

    async def _take(self, partition: int) -> bool:
        kv, key, me = await self._bucket(), _key(partition), self.owner.encode()
        try:
            self.held[partition] = await kv.create(key, me)
            return True
        except KeyWrongLastSequenceError:
            pass
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:
            return False  # expired between the two calls: taken at the next try
        if entry.value == me:  # our own, from before a restart
            self.held[partition] = await kv.update(key, me, last=entry.revision)
            return True
        self.waiting[partition] = (entry.value or b"").decode(errors="replace")
        return False

    async def acquire(self, every_s: float = 1.0) -> None:
        """Take every partition owned, waiting for those another indexer holds."""
        logged = float("-inf")
        while True:
            try:
                for p in self.partitions:
                    if p not in self.held and await self._take(p):
                        self.waiting.pop(p, None)
                if len(self.held) == len(self.partitions):
                    log.info("partitions %s: this indexer (%s) is their only writer",
                             list(self.partitions), self.owner)
                    return
                await self.renew()  # those taken already must not lapse meanwhile
            except LeaseLost:
                raise
            except Exception as exc:  # JetStream busy (an election), the bucket being made
                log.warning("partition leases: %s: %s; retrying", type(exc).__name__, exc)
                self.kv = None
            if time.monotonic() - logged > 30 and self.waiting:
                log.warning("waiting for partitions held by another indexer: %s (their lease "
                            "lapses %.0f s after its holder stops renewing it)",
                            self.waiting, self.lease_s)
                logged = time.monotonic()
            await asyncio.sleep(every_s)

    async def renew(self) -> None:
        """Renew every lease held; LeaseLost when one was taken by another indexer."""
        kv, me = await self._bucket(), self.owner.encode()
        for p, rev in list(self.held.items()):
            try:
                self.held[p] = await kv.update(_key(p), me, last=rev)
            except KeyWrongLastSequenceError as exc:
                raise LeaseLost(f"partition {p} was taken by another indexer") from exc

    async def renew_or_exit(self) -> None:
        try:
            await self.renew()
        except LeaseLost as exc:
            log.critical("%s: stopping before anything more is written", exc)
            exit_process()
        except Exception as exc:  # JetStream busy (an election): the lease outlives a few misses
            log.warning("partition lease not renewed this time (%s: %s)", type(exc).__name__,
                        exc)

    async def release(self) -> None:
        if self.kv is None:
            return
        for p, rev in list(self.held.items()):
            try:
                await self.kv.delete(_key(p), last=rev)
            except Exception as exc:  # taken meanwhile, or NATS away: it lapses by itself
                log.info("lease of partition %s not released (%s)", p, exc)
            self.held.pop(p, None)
