"""The stack under test, and what the chaos rows do to it and count in it.

`chaos_stack_in(home, model)` starts the stack exactly as `make run` does (`totalrecall run` on
free ports, `launcher.launched_stack`). The supervisor restarts a service, nats-server or Postgres
whose process exited (`cli/totalrecall/supervisor.py`); the rows kill processes by pid (kill -9)
and wait for that restart. Counting happens in each store separately: Postgres (`memories` by
id), the Zvec tiers (fetch by key, read after the stack stopped) and the Markdown daily logs
(every event block, parsed as the indexer parses it).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from totalrecall.launcher import RunningStack, launched_stack
from totalrecall_schema import memory_key
from waiting import wait_for_sync

SERVICES = ("watchers", "embedder", "indexer", "recall-api")
#: JetStream durable consumers of the pipeline (embedder on events, indexer on embedded).
CONSUMERS = ("embedder", "indexer")


@dataclass
class ChaosStack:
    running: RunningStack

    @property
    def home(self) -> Path:
        return self.running.home

    @property
    def api(self) -> str:
        return self.running.api

    @property
    def ports(self) -> dict[str, int]:
        return self.running.ports

    # --- processes ---------------------------------------------------------------------------
    def supervisor_log(self) -> str:
        return self.running.log.read_text(errors="replace")

    def service_pid(self, name: str) -> int | None:
        """The pid of the service's current process (the supervisor logs each start)."""
        found = re.findall(rf"started {re.escape(name)} \(pid (\d+)", self.supervisor_log())
        return int(found[-1]) if found else None

    def nats_pid(self) -> int | None:
        return _pid_by_cmdline(["nats-server", "-p", str(self.ports["nats"])])

    def postgres_pid(self) -> int | None:
        """The postmaster's pid (first line of postmaster.pid)."""
        try:
            pid = int((self.home / "pg" / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _alive(pid) else None

    def health(self, name: str) -> tuple[int, dict[str, Any]] | None:
        port = {"recall-api": self.ports["api"], "embedder": self.ports["embedder"],
                "indexer": self.ports["indexer"], "watchers": self.ports["watchers"]}[name]
        path = "/memory/health" if name == "recall-api" else "/health"
        try:
            r = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2)
            return r.status_code, r.json()
        except (httpx.HTTPError, ValueError):
            return None

    def kill_service(self, name: str, timeout: float = 90) -> float:
        """kill -9 the service's process; wait until the supervisor restarted it and it is
        healthy again. Returns the seconds until healthy."""
        old = self.service_pid(name)
        assert old is not None and _alive(old), f"{name} is not running"
        t0 = time.monotonic()
        os.kill(old, signal.SIGKILL)

        def back() -> bool:
            pid = self.service_pid(name)
            if pid is None or pid == old or not _alive(pid):
                return False
            h = self.health(name)
            return h is not None and h[0] == 200
        wait_for_sync(back, timeout, what=f"{name} restarted after kill -9", interval=0.25)
        return time.monotonic() - t0

    # --- the pipeline --------------------------------------------------------------------------
    def consumer_pending(self) -> dict[str, int]:
        """Messages not yet acked by each pipeline consumer (pending + ack-pending), from the
        nats-server monitoring endpoint."""
        url = f"http://127.0.0.1:{self.ports['nats_monitor']}/jsz?consumers=true"
        with urllib.request.urlopen(url, timeout=3) as r:  # noqa: S310 - loopback
            data = json.load(r)
        out: dict[str, int] = {}
        for account in data.get("account_details", []):
            for stream in account.get("stream_detail", []):
                for c in stream.get("consumer_detail", []) or []:
                    name = c.get("name")
                    if name in CONSUMERS:
                        out[name] = out.get(name, 0) + int(c.get("num_pending", 0)) + int(
                            c.get("num_ack_pending", 0))
        return out

    def drained(self) -> bool:
        """Nothing left in the pipeline: both consumers acked everything and the indexer says
        every Zvec tier is whole (`/ready`: no tier held or being re-indexed, Zvec checked
        against Postgres since its start)."""
        try:
            pending = self.consumer_pending()
        except OSError:
            return False
        return (set(pending) >= set(CONSUMERS) and not any(pending.values())
                and self.indexer_ready())

    def indexer_ready(self) -> bool:
        try:
            r = httpx.get(f"http://127.0.0.1:{self.ports['indexer']}/ready", timeout=2)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    def pg_id_counts(self, namespace: str) -> Counter[str]:
        """id -> rows in Postgres `memories` for the namespace."""
        async def q() -> Counter[str]:
            import asyncpg

            conn = await asyncpg.connect(self.running.pg_dsn, timeout=10)
            try:
                rows = await conn.fetch("SELECT id, count(*) AS n FROM memories "
                                        "WHERE namespace = $1 GROUP BY id", namespace)
            finally:
                await conn.close()
            return Counter({r["id"]: int(r["n"]) for r in rows})
        return asyncio.run(q())


@contextmanager
def chaos_stack_in(home: Path, model_path: Path | None, extra_env: dict[str, str] | None = None
                   ) -> Iterator[ChaosStack]:
    """`totalrecall run` in `home` on free ports; stopped (Ctrl-C) on exit."""
    env = {"TR_EMBEDDER_MODEL_PATH": str(model_path)} if model_path else {}
    env.update(extra_env or {})
    with launched_stack(home, extra_env=env, ready_timeout=300) as running:
        yield ChaosStack(running)


# --- counting in the stores after the stack stopped ----------------------------------------------
def markdown_key_counts(home: Path) -> Counter[str]:
    """key -> how many event blocks the daily logs hold for it (a torn block the indexer cut
    off is under `.recovered/`, not counted). Uses the indexer's own block parser."""
    from totalrecall_schema.daily_log import iter_blocks

    counts: Counter[str] = Counter()
    for path in sorted((home / "memory" / "daily").glob("*.md")):
        for block in iter_blocks(path.read_text()):
            if block.kind == "event" and block.key:
                counts[block.key] += 1
            elif block.kind == "forgotten" and block.payload:
                for k in block.payload.get("keys", []):
                    counts.pop(k, None)
    return counts


def zvec_docs(home: Path, keys: list[str]) -> Iterator[tuple[str, Any]]:
    """(key, document) of each of `keys` in each Zvec tier that has it (read with the stack
    stopped; a document's `fields` are its stored payload)."""
    import zvec
    from totalrecall_indexer.core.search import TIERS

    for tier in TIERS:
        path = home / "zvec" / tier
        if not path.exists():
            continue
        col = zvec.open(str(path))
        try:
            for i in range(0, len(keys), 500):
                yield from col.fetch(keys[i: i + 500], include_vector=False).items()
        finally:
            del col


def zvec_key_counts(home: Path, keys: list[str]) -> Counter[str]:
    """key -> in how many Zvec tiers it can be fetched (read with the stack stopped)."""
    return Counter(key for key, _ in zvec_docs(home, keys))


def keys_of(namespace: str, ids: list[str]) -> dict[str, str]:
    """storage key -> id."""
    return {memory_key(namespace, i): i for i in ids}


# --- helpers ----------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by the supervisor) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def _pid_by_cmdline(needles: list[str]) -> int | None:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        text = " ".join(words)
        if all(n in text for n in needles) and words and words[0].endswith(needles[0]):
            return int(entry.name)
    return None


def lost_and_twice(home: Path, namespace: str, accepted: list[str], pg: Counter[str]
                   ) -> tuple[dict[str, int], dict[str, int]]:
    """How many accepted ids each store lacks, and holds more than once (Postgres counted while
    the stack ran: `pg`; Zvec and Markdown read from `home` with the stack stopped)."""
    keys = keys_of(namespace, accepted)
    md = markdown_key_counts(home)
    zv = zvec_key_counts(home, list(keys))
    lost = {"postgres": sum(1 for i in accepted if pg[i] == 0),
            "zvec": sum(1 for k in keys if zv[k] == 0),
            "markdown": sum(1 for k in keys if md[k] == 0)}
    twice = {"postgres": sum(1 for i in accepted if pg[i] > 1),
             "zvec": sum(1 for k in keys if zv[k] > 1),
             "markdown": sum(1 for k in keys if md[k] > 1)}
    return lost, twice


def slash(counts: dict[str, int]) -> str:
    """`{"postgres": 0, "zvec": 1, "markdown": 0}` -> "0/1/0"."""
    return "/".join(str(v) for v in counts.values())
