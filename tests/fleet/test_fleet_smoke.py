"""Many machines, one memory (`make fleet-smoke`): the shipped 3-node JetStream cluster with
replicated streams (R3), three simulated remote hosts streaming 10,000 events with their own
credentials, 2 embedders sharing one durable consumer, 2 indexers each owning one of the index's
2 partitions, 2 recall APIs, one Postgres.

While the events stream, one NATS node (the events stream's leader), one embedder and one
indexer are killed with SIGKILL. Recall meanwhile answers, saying which partition it has
keywords only for; the indexer is restarted (as its supervisor would). Afterwards every event
is stored exactly once (Postgres, its partition owner's Zvec tiers and Markdown logs), nothing
was dead-lettered, both APIs recall each host's events filtered by host, and one host's
credentials cannot publish as another host.

Every process is a real one (nats-server, `python -m totalrecall_<service>`, the watchers'
publisher as each host); they talk over loopback.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import nats
import netns
import pytest
from nats_cluster import NatsCluster, host_password_variable, host_user
from netns import HostNetworks
from service_process import ServiceProcess
from totalrecall.infra.process import spawn, stop
from totalrecall_schema import MemoryEvent, Topology, ensure_streams, memory_key
from totalrecall_schema.daily_log import parse_daily
from totalrecall_schema.partitions import partition_of
from waiting import wait_for

from tests.chaos.report import ROWS, record
from tests.fleet.host_stream import fleet_event

#: Events in all, split over the hosts (`TR_FLEET_EVENTS` makes a smaller run for a quick look).
EVENTS = int(os.environ.get("TR_FLEET_EVENTS", "10000"))
HOSTS = ("a.lan", "b.lan", "c.lan")  # a.lan and c.lan in partition 0, b.lan in partition 1
PARTITIONS = 2
TOPO = Topology(replicas=3, partitions=PARTITIONS)  # the production names: the servers are ours
PASSWORDS = {"NATS_PASSWORD": "svc-pw", "NATS_ROUTE_PASSWORD": "route-pw",
             **{host_password_variable(h): f"{h}-pw" for h in HOSTS}}
HERE = Path(__file__).resolve().parent

pytestmark = [pytest.mark.timeout(1500), pytest.mark.fleet]


def _service(name: str, module: str, prefix: str, home: Path, log: Path,
             url: str, **settings: Any) -> ServiceProcess:
    home.mkdir(parents=True, exist_ok=True)
    env = {"TOTALRECALL_HOME": str(home), f"{prefix}NATS_URL": url,
           f"{prefix}NATS_REPLICAS": "3", f"{prefix}PARTITION_COUNT": str(PARTITIONS)}
    return ServiceProcess(name=name, module=module, env_prefix=prefix, log_path=log, env=env,
                          settings=settings)


class Fleet:
    def __init__(self, root: Path, pg_dsn: str, model_path: Path,
                 nets: HostNetworks | None) -> None:
        self.root = root
        #: The hosts' own network namespaces (root only), else processes on loopback.
        self.nets = nets
        self.cluster = NatsCluster(root / "nats", list(HOSTS), PASSWORDS,
                                   bind=nets.bridge_ip if nets else "127.0.0.1")
        url = self.cluster.services_url()
        logs = root / "logs"
        self.embedders = [
            _service(f"embedder{i}", "totalrecall_embedder", "TR_EMBEDDER_", root / f"e{i}",
                     logs / f"embedder{i}.log", url, model_path=model_path, n_threads=1,
                     device="cpu", ack_wait_s=10)
            for i in range(2)]
        self.indexers = [
            _service(f"indexer{p}", "totalrecall_indexer", "TR_INDEXER_", root / f"i{p}",
                     logs / f"indexer{p}.log", url, pg_dsn=pg_dsn, partitions=str(p),
                     ack_wait_s=15, memory_md_poll_s=0, reconcile_interval_s=0)
            for p in range(PARTITIONS)]
        self.apis = [
            _service(f"recall{i}", "totalrecall_recall_api", "TR_RECALL_", root / f"r{i}",
                     logs / f"recall{i}.log", url, pg_dsn=pg_dsn, search_timeout_s=2.0,
                     deep_search_timeout_s=3.0, embed_timeout_s=5.0)
            for i in range(2)]
        self.hosts: list[subprocess.Popen[bytes]] = []

    @property
    def services(self) -> list[ServiceProcess]:
        return [*self.embedders, *self.indexers, *self.apis]

    def stream(self) -> None:
        per = -(-EVENTS // len(HOSTS))
        for i, host in enumerate(HOSTS):
            first, count = i * per, min(per, EVENTS - i * per)
            inside = self.nets.prefix(i) if self.nets else []
            self.hosts.append(spawn(
                [*inside, sys.executable, str(HERE / "host_stream.py"), "--host", host,
                 "--nats-url", self.cluster.host_url(host), "--first", str(first),
                 "--count", str(count), "--spool", str(self.root / f"spool-{host}"),
                 "--rate", "60"],
                log_path=self.root / "logs" / f"host-{host}.log",
                env={**os.environ, "PYTHONPATH": str(HERE.parents[1])}))

    def stop(self) -> None:
        for p in self.hosts:
            if p.poll() is None:
                stop(p)
        for s in self.services:
            if s.alive:
                s.kill9()  # the test is over: nothing of theirs is checked after this
        self.cluster.stop()


def expected_events() -> dict[str, MemoryEvent]:
    per = -(-EVENTS // len(HOSTS))
    out: dict[str, MemoryEvent] = {}
    for i, host in enumerate(HOSTS):
        for n in range(i * per, min((i + 1) * per, EVENTS)):
            ev = fleet_event(host, n)
            out[ev.key] = ev
    return out


@pytest.fixture
def fleet(tmp_path: Path, pg_dsn: str, model_path: Path) -> Iterator[Fleet]:
    with contextlib.ExitStack() as stack:
        # Each host in a network namespace of its own where this may (root), reaching the
        # cluster over a bridge as another machine would; else a process on loopback.
        nets = stack.enter_context(HostNetworks(len(HOSTS))) if netns.available() is None \
            else None
        f = Fleet(tmp_path, pg_dsn, model_path, nets)
        for n in f.cluster.nodes:
            f.cluster.start(n)
        try:
            yield f
        finally:
            f.stop()


@pytest.fixture
async def admin(fleet: Fleet) -> AsyncIterator[Any]:
    """The test's own services connection: streams made with 3 replicas and 2 partitions."""
    for n in fleet.cluster.nodes:
        await wait_for(lambda n=n: _true(n.healthy()), timeout=30, what=f"{n.name} up")
    nc = await nats.connect(servers=fleet.cluster.services_url().split(","),
                            max_reconnect_attempts=-1, reconnect_time_wait=0.2)

    async def made() -> bool:
        try:
            await ensure_streams(nc.jetstream(timeout=5), TOPO)
        except Exception:  # the cluster elects its meta leader first
            return False
        return True
    await wait_for(made, timeout=60, interval=0.5, what="streams with 3 replicas")
    yield nc
    await nc.close()


async def _true(v: bool) -> bool:
    return v


async def _backlog(js: Any, stream: str, durable: str) -> int | None:
    try:
        info = await js.consumer_info(stream, durable, timeout=3)
    except Exception:
        return None
    return (info.num_pending or 0) + (info.num_ack_pending or 0)


async def _recall(api: ServiceProcess, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(f"http://127.0.0.1:{api.port}/memory/recall", json=body,
                               timeout=30)


def _markdown_keys(home: Path) -> list[str]:
    keys: list[str] = []
    for path in sorted((home / "memory" / "daily").glob("????-??-??.md")):
        keys += [r.key for r in parse_daily(path.read_text())]
    return keys


ROW = next(r for r in ROWS if r.startswith("a fleet"))


async def test_fleet_streams_through_kills_and_stores_each_event_once(
        fleet: Fleet, admin: Any, pg_dsn: str) -> None:
    """The run is recorded as a row of docs/reliability.md, held or not (`record`)."""
    figures: dict[str, Any] = {
        "events": EVENTS,
        "hosts as": "network namespaces" if fleet.nets else
                    f"processes on loopback ({netns.available()})"}
    try:
        await _fleet_run(fleet, admin, pg_dsn, figures)
    except BaseException as exc:
        record(ROW, False, figures, note=f"{type(exc).__name__}: {exc}"[:300])
        raise
    record(ROW, True, figures, note=f"{EVENTS} events over {len(HOSTS)} hosts")


async def _fleet_run(fleet: Fleet, admin: Any, pg_dsn: str, figures: dict[str, Any]) -> None:
    t_start = time.monotonic()
    js = admin.jetstream(timeout=5)
    want = expected_events()
    owner = {k: partition_of(e.namespace, e.metadata.hostname, PARTITIONS)
             for k, e in want.items()}
    per_part = collections.Counter(owner.values())
    assert set(per_part) == {0, 1}

    await asyncio.gather(*(s.start().wait_healthy(timeout=180) for s in fleet.services))
    fleet.stream()
    conn = await asyncpg.connect(pg_dsn)
    try:
        async def stored_at_least(n: int) -> bool:
            return int(await conn.fetchval("SELECT count(*) FROM memories")) >= n
        await wait_for(lambda: stored_at_least(EVENTS // 8), timeout=600, interval=0.5,
                       what="the pipeline under way")

        # Kill: the events stream's leader node, an embedder, an indexer.
        leader = (await js.stream_info(TOPO.events_stream)).cluster.leader
        fleet.cluster.kill(fleet.cluster.node(leader))
        fleet.embedders[0].kill9()
        fleet.indexers[1].kill9()
        figures["killed"] = {"nats": leader, "embedder": 0, "indexer": 1,
                             "at_stored": int(await conn.fetchval(
                                 "SELECT count(*) FROM memories"))}

        # Recall meanwhile: a 200, which says partition 1 is answered from keywords only.
        probe = next(k for k, p in owner.items() if p == 1)
        r = await _recall(fleet.apis[0], {"query": want[probe].summary, "max_results": 5})
        assert r.status_code == 200, r.text
        degraded = r.json()["degraded"]
        assert any(d["component"] == "vector" and d.get("partitions") == [1]
                   for d in degraded), degraded

        await fleet.indexers[1].start().wait_healthy(timeout=180)  # its supervisor's restart

        async def hosts_done() -> bool:
            return all(p.poll() is not None for p in fleet.hosts)
        await wait_for(hosts_done, timeout=600, interval=0.5, what="the hosts' streams sent")
        assert [p.returncode for p in fleet.hosts] == [0, 0, 0], [
            (fleet.root / "logs" / f"host-{h}.log").read_text()[-2000:] for h in HOSTS]
        figures["hosts"] = [json.loads((fleet.root / "logs" / f"host-{h}.log")
                                       .read_text().strip().splitlines()[-1]) for h in HOSTS]

        async def drained() -> bool:
            if not await stored_at_least(EVENTS):
                return False
            for stream, durable in ((TOPO.events_stream, TOPO.embedder_durable),
                                    *((TOPO.embedded_stream, d) for d in TOPO.indexer_durables)):
                if await _backlog(js, stream, durable) != 0:
                    return False
            return True
        await wait_for(drained, timeout=900, interval=1.0, what="every event stored")
        figures["drained_s"] = round(time.monotonic() - t_start, 1)

        rows = await conn.fetch("SELECT key, part, host FROM memories")
        dead = (await js.stream_info(TOPO.dlq_stream)).state.messages
        healths = [await s.health() for s in fleet.indexers]

        # Recall from either API, filtered by host: the same answer, only that host's. The
        # indexers may still be at background work once drained (an index build changes what
        # an approximate search returns, term counts settle), so the two are asked again until
        # they agree: an API that held something of its own would never agree.
        answers: list[list[list[str]]] = [[], []]

        async def apis_agree() -> bool:
            answers[:] = [[], []]
            for host in HOSTS:
                n = next(e for e in want.values() if e.metadata.hostname == host)
                for i, api in enumerate(fleet.apis):
                    r = await _recall(api, {"query": n.summary, "host": host, "max_results": 5})
                    assert r.status_code == 200, r.text
                    body = r.json()
                    got = [m["id"] for m in body["memories"]]
                    assert n.id in got, (host, i, got)
                    assert {m["metadata"].get("host") for m in body["memories"]} == {host}
                    assert body["degraded"] == [], body["degraded"]
                    answers[i].append(got)
            return answers[0] == answers[1]
        await wait_for(apis_agree, timeout=60, interval=2.0,
                       what="both recall APIs giving the same answers",
                       context=lambda: f"API 0: {answers[0]}; API 1: {answers[1]}")
    finally:
        await conn.close()

    # Every event stored exactly once: Postgres (one row per key, the partition recorded) …
    assert len(rows) == len(want) == EVENTS
    assert {r["key"] for r in rows} == set(want)
    assert {r["key"]: r["part"] for r in rows} == owner
    assert dead == 0
    # … and in its partition owner's Zvec tiers and Markdown logs, in no one else's.
    for p, health in enumerate(healths):
        assert health is not None and health["partitions"] == [p]
        assert sum(health["docs"].values()) == per_part[p], (p, health["docs"])
        md = _markdown_keys(fleet.root / f"i{p}")
        dupes = [k for k, c in collections.Counter(md).items() if c > 1]
        assert not dupes, dupes[:5]
        assert set(md) == {k for k, q in owner.items() if q == p}

    # One host cannot publish as another.
    refused: list[str] = []

    async def on_error(exc: Exception) -> None:
        refused.append(str(exc))
    a = await nats.connect(servers=fleet.cluster.urls, user=host_user("a.lan"),
                           password=PASSWORDS[host_password_variable("a.lan")],
                           inbox_prefix=TOPO.host_inbox_prefix("a.lan"), error_cb=on_error)
    forged = TOPO.host_events_subject("b.lan", "system.service")
    with pytest.raises(Exception):  # noqa: B017 - no PubAck: the server dropped it
        await a.jetstream(timeout=2).publish(
            forged, fleet_event("b.lan", EVENTS + 1).model_dump_json().encode(), timeout=2)
    violation = f'permissions violation for publish to "{forged}"'.lower()
    await wait_for(lambda: _true(any(violation in e.lower() for e in refused)),
                   timeout=10, what="the forged publish refused")
    await a.close()
    assert memory_key("default", f"fleet-{EVENTS + 1:05d}") not in {r["key"] for r in rows}
    figures["lost (pg/zvec/md)"] = "0/0/0"
    figures["forged publish"] = "refused"
    figures["total_s"] = round(time.monotonic() - t_start, 1)
    print("fleet figures:", json.dumps(figures))
