"""A client streaming known events into `POST /memory/ingest` while the rows break things.

Every event has its own id and its own text (so no two fold into one memory as exact repeats).
A batch that was not accepted (connection refused while recall-api restarts, 503 while NATS is
down, a timeout) is sent again with the same ids, as a client would: ingest is idempotent by id,
so a retry must never make a second memory. Only ids of batches answered 2xx count as accepted.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

NAMESPACE = "chaos"
_WORDS = ("disk", "latency", "backup", "kernel", "socket", "cron", "nginx", "postgres", "mount",
          "quota", "dns", "certificate", "swap", "journal", "firewall", "docker", "ssh", "raid",
          "timer", "upgrade", "rollback", "checksum", "inode", "cache", "thermal", "fan")


def event(run: str, i: int, rng: random.Random) -> dict[str, Any]:
    words = " ".join(rng.sample(_WORDS, 4))
    token = f"ev{run}x{i}"
    return {"id": token, "namespace": NAMESPACE, "category": "system.service",
            "summary": f"{words} incident {token} on host-{i % 13}",
            "detail": f"chaos stream event {i} of run {run}: {words}",
            "metadata": {"severity": rng.choice(["info", "warning", "error"]),
                         "tags": ["chaos", run]}}


@dataclass
class Streamer:
    """Sends `total` events in batches of `batch` at about `rate` events/s on its own thread."""

    api: str
    total: int
    rate: float
    run: str
    batch: int = 50
    seed: int = 19
    accepted: list[str] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    retried_batches: int = 0
    #: the first distinct refusals, "<status>: <body>" (what a client is told)
    refusals: list[str] = field(default_factory=list)
    error: BaseException | None = None
    started: float = 0.0
    finished: float = 0.0
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    def start(self) -> Streamer:
        self._thread = threading.Thread(target=self._run, name="chaos-streamer", daemon=True)
        self.started = time.monotonic()
        self._thread.start()
        return self

    def join(self, timeout: float) -> None:
        assert self._thread is not None
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._stop.set()
            raise AssertionError(f"streaming did not finish in {timeout:.0f}s "
                                 f"({len(self.accepted)}/{self.total} accepted)")
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        rng = random.Random(self.seed)
        try:
            with httpx.Client(timeout=20) as client:
                for start in range(0, self.total, self.batch):
                    if self._stop.is_set():
                        return
                    events = [event(self.run, i, rng)
                              for i in range(start, min(start + self.batch, self.total))]
                    self._send(client, events)
                    # pace: where the stream should be by now at `rate`
                    due = self.started + (start + len(events)) / self.rate
                    delay = due - time.monotonic()
                    if delay > 0:
                        self._stop.wait(delay)
        except BaseException as exc:  # noqa: BLE001 - reported by join()
            self.error = exc
        finally:
            self.finished = time.monotonic()

    def _send(self, client: httpx.Client, events: list[dict[str, Any]]) -> None:
        """Until accepted: a client retries with the same ids (backing off up to 2 s)."""
        backoff, first = 0.1, True
        deadline = time.monotonic() + 600
        while not self._stop.is_set():
            if not first:
                self.retried_batches += 1
            first = False
            try:
                r = client.post(f"{self.api}/memory/ingest", json=events)
                if r.status_code < 300:
                    body = r.json()
                    assert sorted(body["ids"]) == sorted(e["id"] for e in events), body
                    self.accepted.extend(body["ids"])
                    return
                self.failures[f"http {r.status_code}"] += 1
                said = f"{r.status_code}: {r.text[:300]}"
                if len(self.refusals) < 20 and said not in self.refusals:
                    self.refusals.append(said)
            except httpx.HTTPError as exc:
                self.failures[type(exc).__name__] += 1
            if time.monotonic() > deadline:
                raise AssertionError(f"a batch was refused for 10 minutes: {self.failures}")
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 2.0)
