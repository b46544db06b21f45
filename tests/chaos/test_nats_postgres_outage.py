"""Row: nats-server killed and restarted mid-stream; Postgres stopped for 60 s.

While events stream into the API:
1. nats-server gets kill -9; the supervisor of `totalrecall run` restarts it (on the same store,
   so JetStream keeps what it had); the client's refused batches are retried.
2. Postgres is stopped for 60 s (a fast shutdown: it accepts no connections). The supervisor
   would restart it at once, so it is paused (SIGSTOP) for that minute and resumed after, when
   it restarts Postgres as after any crash. Meanwhile recall is asked every second: it must answer
   (vector-only, or a clear 503, never hang or 500) and `/memory/health` must name Postgres.
Afterwards: every accepted id exactly once in Postgres, Zvec and Markdown; an event accepted
while Postgres was down is recallable once it is back.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from waiting import wait_for_sync

from .report import record
from .stack import ChaosStack, chaos_stack_in, lost_and_twice, slash
from .streaming import NAMESPACE, Streamer

ROW = "nats-server killed and restarted mid-stream; Postgres stopped 60 s"
#: A recall during an outage must answer within this (the API's own timeouts are shorter).
ANSWER_WITHIN_S = 10.0


@dataclass
class Probe:
    """Recall and health asked every second during an outage."""

    statuses: Counter[str] = field(default_factory=Counter)
    slowest_s: float = 0.0
    health: Counter[str] = field(default_factory=Counter)
    health_reasons: set[str] = field(default_factory=set)
    bad: list[str] = field(default_factory=list)


def _probe(stack: ChaosStack, seconds: float, query: str) -> Probe:
    p = Probe()
    end = time.monotonic() + seconds
    tick = threading.Event()
    with httpx.Client(timeout=ANSWER_WITHIN_S) as client:
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                r = client.post(f"{stack.api}/memory/recall",
                                json={"query": query, "timeframe": "all", "namespace": NAMESPACE})
                p.statuses[str(r.status_code)] += 1
                if r.status_code >= 500 and r.status_code != 503:
                    p.bad.append(f"{r.status_code}: {r.text[:200]}")
                elif r.status_code == 503 and not r.json().get("detail"):
                    p.bad.append("503 without a reason")
            except httpx.HTTPError as exc:
                p.statuses[type(exc).__name__] += 1
                p.bad.append(f"recall did not answer: {type(exc).__name__}")
            p.slowest_s = max(p.slowest_s, time.monotonic() - t0)
            h = stack.health("recall-api")
            if h is not None:
                p.health[str(h[0])] += 1
                pg = (h[1].get("checks") or {}).get("postgres") or {}
                if not pg.get("ok", True):
                    p.health_reasons.add(str(pg.get("error") or pg.get("reason") or pg)[:120])
            tick.wait(max(0.0, 1.0 - (time.monotonic() - t0)))  # the probe's cadence
    return p


def _kill_nats(stack: ChaosStack) -> float:
    """kill -9 nats-server; seconds until the supervisor's restart answers again."""
    old = stack.nats_pid()
    assert old is not None, "nats-server not found"
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)

    def back() -> bool:
        pid = stack.nats_pid()
        if pid is None or pid == old:
            return False
        try:
            return httpx.get(f"http://127.0.0.1:{stack.ports['nats_monitor']}/healthz",
                             timeout=1).status_code == 200
        except httpx.HTTPError:
            return False
    wait_for_sync(back, 60, what="nats-server restarted", interval=0.25)
    return time.monotonic() - t0


def _stop_postgres(stack: ChaosStack, seconds: float, query: str) -> tuple[float, Probe]:
    """Postgres down for `seconds` (the supervisor paused so it does not restart it at once),
    probed meanwhile; returns (seconds down, the probe)."""
    supervisor = stack.running.proc.pid
    pg = stack.postgres_pid()
    assert pg is not None, "postgres not running"
    os.kill(supervisor, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        os.kill(pg, signal.SIGINT)  # fast shutdown: connections refused from now on
        wait_for_sync(lambda: stack.postgres_pid() is None, 30,
                      what="postgres to stop", interval=0.25)
        probe = _probe(stack, seconds, query)
        down = time.monotonic() - t0
    finally:
        os.kill(supervisor, signal.SIGCONT)  # it sees Postgres gone and restarts it
    wait_for_sync(stack.postgres_pid, 60, what="the supervisor to restart postgres", interval=0.25)
    return down, probe


def _recall_ids(stack: ChaosStack, query: str) -> list[str]:
    r = httpx.post(f"{stack.api}/memory/recall", timeout=30,
                   json={"query": query, "timeframe": "all", "namespace": NAMESPACE,
                         "maxResults": 5})
    return [m["id"] for m in r.json()["memories"]] if r.status_code == 200 else []


def run_row(home: Path, model_path: Path, events: int, rate: float, pg_down_s: float) -> None:
    run = uuid.uuid4().hex[:6]
    with chaos_stack_in(home, model_path) as stack:
        streamer = Streamer(stack.api, total=events, rate=rate, run=run).start()
        wait_for_sync(lambda: len(streamer.accepted) >= events // 5, 120,
                      what="a fifth of the stream", interval=0.25)
        refused_before = sum(streamer.failures.values())
        nats_back_s = _kill_nats(stack)
        wait_for_sync(lambda: len(streamer.accepted) >= events * 2 // 5, 300,
                      what="the stream to resume after the nats-server restart", interval=0.25)
        refused_nats = sum(streamer.failures.values()) - refused_before
        mark = len(streamer.accepted)
        down_s, probe = _stop_postgres(stack, pg_down_s, f"incident ev{run}x1")
        during = streamer.accepted[mark:]
        assert during, "events were accepted while Postgres was down"
        t_up = time.monotonic()
        outage_id = during[len(during) // 2]
        wait_for_sync(lambda: outage_id in _recall_ids(
                          stack, f"what happened in incident {outage_id}?"), 300,
                      what="an event ingested during the Postgres outage to be recallable",
                      interval=0.25)
        recovered_s = time.monotonic() - t_up
        streamer.join(timeout=events / rate + 600)
        accepted = list(streamer.accepted)
        t_end = time.monotonic()

        def all_in() -> bool:
            return stack.drained() and len(stack.pg_id_counts(NAMESPACE)) >= len(set(accepted))
        wait_for_sync(all_in, 900, what="the pipeline to catch up", interval=1)
        catch_up_s = time.monotonic() - t_end
        pg = stack.pg_id_counts(NAMESPACE)
    lost, twice = lost_and_twice(home, NAMESPACE, accepted, pg)
    health_503 = probe.health.get("503", 0)
    holds = (not any(lost.values()) and not any(twice.values()) and not probe.bad
             and probe.slowest_s < ANSWER_WITHIN_S and health_503 > 0)
    figures: dict[str, Any] = {
        "events accepted": len(accepted),
        "nats-server back s": round(nats_back_s, 1),
        "batches refused during nats restart": refused_nats,
        "postgres down s": round(down_s, 1),
        "recall during pg outage": ", ".join(f"{k}×{v}" for k, v in sorted(probe.statuses.items())),
        "slowest recall s": round(probe.slowest_s, 2),
        "health during pg outage": ", ".join(f"{k}×{v}" for k, v in sorted(probe.health.items())),
        "outage event recallable after pg back s": round(recovered_s, 1),
        "catch-up after stream s": round(catch_up_s, 1),
        "lost (pg/zvec/md)": slash(lost), "twice (pg/zvec/md)": slash(twice),
    }
    record(ROW, holds, figures, note=(f"{events} events at {rate:.0f}/s; health named: "
                                      + "; ".join(sorted(probe.health_reasons))[:160]))
    assert not probe.bad, probe.bad[:5]
    assert probe.slowest_s < ANSWER_WITHIN_S
    assert health_503 > 0, f"health never reported Postgres down: {probe.health}"
    assert not any(lost.values()), f"lost: {lost}"
    assert not any(twice.values()), f"stored twice: {twice}"


@pytest.mark.fast
@pytest.mark.timeout(600)  # a loaded 2-core machine drains slowly
def test_nats_kill_and_short_postgres_stop(tmp_path: Path, model_path: Path) -> None:
    run_row(tmp_path / "home", model_path, events=600, rate=40, pg_down_s=10)


@pytest.mark.chaos
@pytest.mark.timeout(3600)
def test_nats_kill_and_postgres_stopped_60s(tmp_path: Path, model_path: Path) -> None:
    run_row(tmp_path / "home", model_path, events=6000, rate=60, pg_down_s=60)
