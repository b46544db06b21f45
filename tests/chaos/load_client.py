"""The sustained-load row's client and probes, shared with `bench/cpu_per_op.py` and
`bench/row_trace.py`: the machine events and questions it sends, a keep-alive connection pool,
sends at a fixed rate, and what it reads of the stack's processes (their pids, memory, CPU time)
and of its consumers (lag, drain)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

import nats
import psutil
from totalrecall_schema import Topology

from bench.peers.procmem import rollup_kb
from tests.chaos.stack_inputs import Stack
from tests.waiting import wait_for_sync

T = TypeVar("T")

#: After a load: how long the backlog may take to drain before it counts as not drained.
DRAIN_TIMEOUT_S = 300.0

SERVICES = ("totalrecall_recall_api", "totalrecall_embedder", "totalrecall_indexer",
            "totalrecall_watchers", "nats-server", "postgres")

UNITS = ["nginx.service", "postgresql.service", "sshd.service", "docker.service", "cron.service",
         "redis.service", "grafana-server.service", "systemd-resolved.service"]
VERBS = ["failed: port {p} already in use", "restarted after watchdog timeout ({p} ms)",
         "entered failed state with result 'exit-code' {p}", "OOM killed worker {p}",
         "reload finished in {p} ms", "connection refused to 10.0.{q}.{p}"]
QUERIES = ["why did nginx fail?", "what was OOM killed?", "postgres port in use",
           "which service restarted after a watchdog timeout?", "connection refused errors",
           "redis failures today", "what happened to docker?", "slow reloads of grafana"]


#: How people ask about the events above: a question is one of these with a unit (its short name
#: or the whole unit) and often a host or a port, so that thousands of distinct ones exist.
ASKED = ["why did {u} fail{where}?", "what happened to {u}{where}?", "is {u} still down{where}?",
         "{u} errors{where} today", "which port was {u} fighting over{where}?",
         "did {u} get OOM killed{where}?", "how long did {u} take to reload{where}?",
         "when was {u} last restarted{where}?", "show me {u} failures{where}",
         "what broke {u}{where} this morning?", "{u} connection refused{where}",
         "has {u} crashed again{where}?", "why is {u} restarting{where}?",
         "{u} watchdog timeout{where}", "anything odd with {u}{where} lately?"]


def questions(n: int, seed: int = 20261129) -> list[str]:
    """`n` distinct questions about the machine events `event` makes, in a seeded random order.
    (Eight fixed questions measured the query-embedding caches, not recall: after the first
    second every one was answered from a cache.)"""
    rng = random.Random(seed)
    found: dict[str, None] = {}
    while len(found) < n:
        unit = rng.choice(UNITS)
        name = unit if rng.random() < 0.3 else unit.removesuffix(".service")
        where = rng.choice(["", "", f" on builder-{rng.randint(1, 40)}",
                            f" on port {rng.randint(1, 65535)}"])
        found[rng.choice(ASKED).format(u=name, where=where)] = None
    return list(found)


def event(ns: str, rng: random.Random) -> dict[str, Any]:
    unit = rng.choice(UNITS)
    text = rng.choice(VERBS).format(p=rng.randint(1, 65535), q=rng.randint(0, 255))
    return {"summary": f"{unit} {text}", "category": "system.service", "namespace": ns,
            "detail": f"run {uuid.uuid4().hex[:12]} on host builder-{rng.randint(1, 40)}",
            "metadata": {"severity": "error", "service": unit}}


async def fixed_rate(rate: float, duration: float, t0: float,
                     send: Callable[[float], Coroutine[Any, Any, None]]) -> int:
    """`send(scheduled)` `rate` times a second for `duration` seconds from `t0` (monotonic),
    each on a task of its own whatever the earlier ones are doing (an open loop: a slow server
    does not slow the offered load); returns once all are done. Returns how many sends the
    client itself started over 100 ms late."""
    tasks: set[asyncio.Task[None]] = set()
    late = 0
    for i in range(int(rate * duration)):
        scheduled = t0 + i / rate
        delay = scheduled - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        elif delay < -0.1:
            late += 1
        task = asyncio.create_task(send(scheduled))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
    return late


class Pool:
    """A fixed pool of keep-alive HTTP/1.1 connections for JSON POSTs. (httpx's pool spends
    quadratic time assigning thousands of queued requests: under load the client, not the
    server, became the bottleneck.) A request waits for a free connection; its latency still
    counts from its scheduled time."""

    def __init__(self, url: str, headers: dict[str, str], size: int) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.size = size
        self.free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter] | None] = \
            asyncio.Queue()
        for _ in range(size):
            self.free.put_nowait(None)  # opened on first use

    async def post(self, path: str, body: Any, timeout: float = 30) -> int:
        return (await self.post_timed(path, body, timeout))[0]

    async def post_timed(self, path: str, body: Any, timeout: float = 30
                         ) -> tuple[int, dict[str, float]]:
        """`post`, with the stages the server says the request's time went to (its
        `Server-Timing` header, `server_timing`; empty without one)."""
        # A request that waited `timeout` for a connection fails like one the server held.
        conn = await asyncio.wait_for(self.free.get(), timeout)
        try:
            if conn is not None and conn[0].at_eof():
                conn[1].close()  # the server closed it while idle (keep-alive timeout)
                conn = None
            reused = conn is not None
            if conn is None:
                conn = await asyncio.open_connection(self.host, self.port)
            try:
                answer = await asyncio.wait_for(self._exchange(conn, path, body), timeout)
            except ConnectionResetError:
                if not reused:
                    raise
                # Closed by the server as it went idle, just before this request: once more
                # on a new connection (as an HTTP client's pool does).
                conn[1].close()
                conn = await asyncio.open_connection(self.host, self.port)
                answer = await asyncio.wait_for(self._exchange(conn, path, body), timeout)
        except BaseException:
            if conn is not None:
                conn[1].close()
            self.free.put_nowait(None)
            raise
        self.free.put_nowait(conn)
        return answer

    async def _exchange(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                        path: str, body: Any) -> tuple[int, dict[str, float]]:
        reader, writer = conn
        data = json.dumps(body).encode()
        writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n{self.extra}"
                     f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
                     .encode() + data)
        await writer.drain()
        line = await reader.readline()
        if not line:
            raise ConnectionResetError("the server closed the connection")
        status = int(line.split()[1])
        length, stages = 0, {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "server-timing":
                stages = server_timing(value)
        await reader.readexactly(length)
        return status, stages

    async def close(self) -> None:
        while not self.free.empty():
            conn = self.free.get_nowait()
            if conn is not None:
                conn[1].close()


def server_timing(value: str) -> dict[str, float]:
    """A `Server-Timing` header's durations by name, in ms (`name;dur=1.5, other;dur=2`)."""
    out: dict[str, float] = {}
    for metric in value.split(","):
        name, *params = (part.strip() for part in metric.split(";"))
        for param in params:
            key, _, dur = param.partition("=")
            if name and key == "dur":
                out[name] = float(dur)
    return out


def service_pids(stack: Stack) -> dict[str, int]:
    found: dict[str, int] = {}
    for child in psutil.Process(stack.running.proc.pid).children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
        except psutil.Error:
            continue
        for name in SERVICES:
            if name in cmd and name not in found and (name != "postgres" or "-D" in cmd):
                found[name] = child.pid
    return found


def memory_mb(proc: psutil.Process) -> tuple[float, float]:
    """(PSS, private anonymous memory) of a process in MB, from one read of its `smaps_rollup`.

    PSS: shared pages divided among the processes that map them. (Postgres's backends each map
    the shared buffers: summing their RSS counted those pages once per backend that had touched
    them, a "growth" of 800 MB that was the pool warming up.)

    Private anonymous memory (heaps, stacks, private mappings): what a leak grows. PSS also
    counts the pages a process maps from files, which here grow with the data stored (zvec maps
    its vector files: the page cache of the store, which the kernel may drop) and shared memory
    that warms up (Postgres's buffers); this leaves both out."""
    try:
        with open(f"/proc/{proc.pid}/smaps_rollup", encoding="ascii") as fh:
            text = fh.read()
    except PermissionError:
        return float(proc.memory_info().rss) / 2**20, 0.0
    except OSError as exc:  # gone since it was listed
        raise psutil.NoSuchProcess(proc.pid) from exc
    return rollup_kb(text, "Pss") / 1024, rollup_kb(text, "Anonymous") / 1024


def _per_process(pids: dict[str, int], measure: Callable[[psutil.Process], T]
                 ) -> dict[str, list[T]]:
    """`measure` of each service's processes (Postgres: the postmaster and its backends, the
    pool's connections); none for a service that is gone."""
    out: dict[str, list[T]] = {}
    for name, pid in pids.items():
        out[name] = []
        try:
            proc = psutil.Process(pid)
            out[name].append(measure(proc))
            children = proc.children(recursive=True) if name == "postgres" else []
        except psutil.Error:
            out[name] = []
            continue
        for child in children:
            # A backend or an autovacuum worker that ended since the listing is no longer
            # part of the service (before, it made the whole sample 0).
            with contextlib.suppress(psutil.Error):
                out[name].append(measure(child))
    return out


def _per_service(pids: dict[str, int], measure: Callable[[psutil.Process], float]
                 ) -> dict[str, float]:
    """`measure` summed over each service's processes; 0 for a service that is gone."""
    return {name: sum(values, 0.0) for name, values in _per_process(pids, measure).items()}


def memory_by_service(pids: dict[str, int]) -> tuple[dict[str, float], dict[str, float]]:
    """(PSS, private anonymous memory) per service in MB (`memory_mb`), from one pass over its
    processes."""
    per = _per_process(pids, memory_mb)
    return ({name: sum((m[0] for m in ms), 0.0) for name, ms in per.items()},
            {name: sum((m[1] for m in ms), 0.0) for name, ms in per.items()})


async def lag(js: Any, topo: Topology) -> tuple[int, int]:
    emb = await js.consumer_info(topo.events_stream, topo.embedder_durable)
    idx = await js.consumer_info(topo.embedded_stream, topo.indexer_durable)
    return (emb.num_pending + emb.num_ack_pending, idx.num_pending + idx.num_ack_pending)


def drain_s(stack: Stack) -> float | None:
    async def current() -> tuple[int, int]:
        nc = await nats.connect(stack.running.nats_url)
        try:
            return await lag(nc.jetstream(), Topology())
        finally:
            await nc.drain()

    start = time.monotonic()
    try:
        wait_for_sync(lambda: asyncio.run(current()) == (0, 0), DRAIN_TIMEOUT_S,
                      what="the pipeline to drain", interval=1)
    except AssertionError:
        return None  # recorded as not drained (the lag at the end is in the figures)
    return time.monotonic() - start


def stolen_seconds() -> float:
    """CPU time the hypervisor has taken from this machine's CPUs so far, all CPUs together
    (`/proc/stat`'s steal; 0 where the kernel does not count it). A VM whose host is busy runs
    the same work slower: beside the services' cores, it tells the machine's share of a slow
    run from the code's."""
    return float(getattr(psutil.cpu_times(), "steal", 0.0))


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """CPU time (user + system) each service has used so far; Postgres's backends included."""
    return _per_service(pids, lambda p: float(sum(p.cpu_times()[:2])))
