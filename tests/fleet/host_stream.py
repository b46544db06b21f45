"""A simulated remote host: its watchers' publisher (`NatsPublisher` as that host, with the host's
own NATS credentials, spooling while NATS is away) streams `--count` events at `--rate` per
second, then waits until its spool is empty. Prints one JSON line of counts at the end.

    python tests/fleet/host_stream.py --host a.lan --nats-url URL --first 0 --count 3334 \
        --spool DIR [--rate 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from totalrecall_schema import EventMetadata, MemoryEvent, Topology
from totalrecall_watchers.adapters.publisher import NatsPublisher

UNITS = ("nginx", "postgresql", "sshd", "docker", "cron", "backup", "redis", "grafana")
CATEGORIES = ("system.service", "error", "system.process")


def fleet_event(host: str, n: int) -> MemoryEvent:
    """Event `n` of the fleet: distinct text (no two fold into one), three categories."""
    unit = UNITS[n % len(UNITS)]
    return MemoryEvent(
        id=f"fleet-{n:05d}", category=CATEGORIES[n % len(CATEGORIES)],
        timestamp=datetime.now(UTC),
        summary=f"{unit}.service on {host} failed with exit code {n % 7} (fleet event {n:05d})",
        metadata=EventMetadata(severity="error", host=host, service=f"{unit}.service"))


async def stream(args: argparse.Namespace) -> int:
    pub = NatsPublisher(nats_url=args.nats_url, topology=Topology(replicas=3, partitions=2),
                        spool=Path(args.spool), as_host=args.host, publish_timeout_s=2,
                        connect_timeout_s=2, reconnect_wait_s=0.2, drain_interval_s=0.5)
    await pub.start()
    outcomes = {"published": 0, "spooled": 0}
    t0 = time.monotonic()
    try:
        for i in range(args.count):
            due = t0 + i / args.rate
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            outcomes[await pub.publish(fleet_event(args.host, args.first + i))] += 1
        deadline = time.monotonic() + args.drain_timeout
        while pub.spool is not None and len(pub.spool) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        left = len(pub.spool) if pub.spool is not None else 0
    finally:
        await pub.stop()
    print(json.dumps({"host": args.host, **outcomes, "drained": pub.drained, "left": left}),
          flush=True)
    return 0 if left == 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", required=True)
    ap.add_argument("--nats-url", required=True)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--spool", required=True)
    ap.add_argument("--rate", type=float, default=60.0)
    ap.add_argument("--drain-timeout", type=float, default=180.0)
    return asyncio.run(stream(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
