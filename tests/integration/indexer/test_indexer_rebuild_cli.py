"""`totalrecall rebuild` (cli/totalrecall/commands/rebuild/): against the running indexer (a real
subprocess; progress over NATS), through the HTTP API, and offline with the stack stopped
(Postgres started for the rebuild, the real model loaded in-process). After a rebuild, vector
search answers exactly as before."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import asyncpg
import numpy as np
import pytest
from indexer_it_helpers import MODEL, Harness, make_event, unit_vectors, wait_for
from indexer_proc import IndexerProcess
from totalrecall.commands.rebuild import main as rebuild_main
from totalrecall.infra import PostgresServer, free_port
from totalrecall_schema import (
    EmbeddedEvent,
    EmbedReply,
    EmbedRequest,
    Topology,
    VectorSearchReply,
    VectorSearchRequest,
)


def cli_env(monkeypatch: pytest.MonkeyPatch, *, nats_url: str, pg_dsn: str, home: Path,
            topology: Topology) -> None:
    monkeypatch.setenv("TOTALRECALL_HOME", str(home))
    monkeypatch.setenv("TR_INDEXER_NATS_URL", nats_url)
    monkeypatch.setenv("TR_INDEXER_PG_DSN", pg_dsn)
    monkeypatch.setenv("TR_INDEXER_SUBJECT_PREFIX", topology.prefix)
    monkeypatch.setenv("TR_INDEXER_STREAM_PREFIX", topology.stream_prefix)
    monkeypatch.setenv("TOTALRECALL_API", f"http://127.0.0.1:{free_port()}")  # nothing there


async def search_all(h: Harness, probes: list[list[float]], model: str | None = MODEL
                     ) -> list[list[tuple[str, float]]]:
    out = []
    for vec in probes:
        req = VectorSearchRequest(vector=vec, model=model, topk=8,
                                  tiers=["hot", "warm", "cold"])
        rep = VectorSearchReply.model_validate_json(
            await h.request(h.topology.rpc_vector_search, req, timeout=20))
        assert rep.error is None, rep.error
        out.append([(hit.key, round(hit.score, 4)) for hit in rep.hits])
    return out


def assert_same_hits(a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float) -> None:
    """Same scores rank by rank, and each hit of one is in the other with (nearly) its score,
    except for ties at the cut-off that may fall either side of it."""
    assert len(a) == len(b)
    assert np.allclose([s for _k, s in a], [s for _k, s in b], atol=tol)
    for x, y in ((a, b), (b, a)):
        cut, other = y[-1][1], dict(y)
        for key, score in x:
            if key in other:
                assert abs(other[key] - score) <= tol, (key, score, other[key])
            else:
                assert score <= cut + tol, (key, score, cut)


async def pg_total(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM memories"))
    except asyncpg.UndefinedTableError:
        return 0
    finally:
        await conn.close()


async def drained(h: Harness, dsn: str, n: int) -> bool:
    info = await h.js.consumer_info(h.topology.embedded_stream, h.topology.indexer_durable)
    return info.num_pending == 0 and info.num_ack_pending == 0 and await pg_total(dsn) >= n


async def test_rebuild_against_the_running_indexer(
        nats_url: str, pg_dsn: str, topology: Topology, tr_home: Path, harness: Harness,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    n = 600
    vecs = unit_vectors(n, seed=21)
    events = [make_event(i, vecs[i], age=timedelta(hours=i % 72, minutes=1)) for i in range(n)]
    table = {e.event.embedding_text(): [float(v) for v in vecs[i]] for i, e in enumerate(events)}
    extra = unit_vectors(4, seed=22)
    (tr_home / "memory").mkdir(parents=True)
    (tr_home / "memory" / "MEMORY.md").write_text("## Preferences\n- likes tea\n- hates noise\n")

    async def embedder(msg: Any) -> None:  # the embedder service: the same vectors every time
        req = EmbedRequest.model_validate_json(msg.data)
        vectors = [table.get(t) or [float(v) for v in extra[len(t) % 4]] for t in req.texts]
        await msg.respond(EmbedReply(vectors=vectors, model=MODEL, dim=384)
                          .model_dump_json().encode())

    sub = await harness.nc.subscribe(topology.rpc_embed_batch, cb=embedder)
    proc = IndexerProcess(nats_url=nats_url, pg_dsn=pg_dsn, home=tr_home, topology=topology,
                          log_path=tmp_path / "indexer.log", fetch_timeout_s=0.3,
                          embed_batch=16)  # many embed requests: progress to watch
    proc.start()
    try:
        await proc.wait_healthy()
        await harness.publish(events)
        await wait_for(lambda: drained(harness, pg_dsn, n + 2), timeout=120,
                       what="events and MEMORY.md indexed")
        probes = [[float(v) for v in vecs[i]] for i in (0, 7, 99, 300, 599)]
        probes += [[float(v) for v in unit_vectors(1, seed=s)[0]] for s in (31, 32)]
        before = await search_all(harness, probes)

        cli_env(monkeypatch, nats_url=nats_url, pg_dsn=pg_dsn, home=tr_home, topology=topology)
        rc = await asyncio.to_thread(rebuild_main, ["--online", "--progress", "plain", "--json"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        result = json.loads(out)
        assert result["records"] == n and result["embedded"] == n
        assert result["memory_md"]["entries"] == 2 and result["mode"] == "nats"
        assert "the running indexer" in err
        assert "rebuild: re-indexing" in err and "rebuild: done 600/600 (100%)" in err
        assert await pg_total(pg_dsn) == n + 2
        assert await search_all(harness, probes) == before
        assert proc.alive
        # the progress is in the admin stats too (what the API's /memory/stats shows)
        from totalrecall_schema import AdminReply, AdminRequest

        st = AdminReply.model_validate_json(
            await harness.request(topology.rpc_index_admin, AdminRequest(verb="stats")))
        assert st.result["rebuild"]["finished"] and st.result["rebuild"]["phase"] == "done"

        # offline is refused while the indexer holds Zvec
        rc = await asyncio.to_thread(rebuild_main, ["--offline", "--progress", "none",
                                                    "--embedder", "none"])
        assert rc == 1 and "indexer still running" in capsys.readouterr().err
    finally:
        proc.stop()
        await sub.unsubscribe()


class _FakeApi(BaseHTTPRequestHandler):
    """recall-api's /memory/rebuild + /memory/stats, as the CLI sees them."""

    state: ClassVar[dict[str, Any]] = {}

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, obj: Any, status: int = 200) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        self._json({"index": {"docs": {}, "rebuild": self.state.get("progress")}})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        started = time.time()
        for done in range(0, 101, 25):
            self.state["progress"] = {"job": "rebuild", "phase": "index", "done": done,
                                      "total": 100, "elapsed_s": 0.1, "started_at": started,
                                      "finished": False}
            time.sleep(0.6)  # a job that takes a while: the CLI shows its progress meanwhile
        result = {"records": 100, "embedded": 100, "unembedded": 0, "model": "m"}
        self.state["progress"] = {"job": "rebuild", "phase": "done", "done": 100, "total": 100,
                                  "started_at": started, "finished": True, "result": result}
        if self.state.get("gateway_timeout"):  # the API gave up waiting; the job finished
            self._json({"detail": "indexer unavailable: TimeoutError"}, 503)
        else:
            self._json({"ok": True, "result": result, "error": None})


@pytest.mark.parametrize("gateway_timeout", [False, True])
def test_rebuild_through_the_http_api(gateway_timeout: bool, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    _FakeApi.state = {"gateway_timeout": gateway_timeout,
                      "progress": {"job": "rebuild", "phase": "done", "started_at": 1.0,
                                   "finished": True}}  # an old job: must not end this one
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("TOTALRECALL_HOME", str(tmp_path))
        rc = rebuild_main(["--nats-url", f"nats://127.0.0.1:{free_port()}", "--api",
                           f"http://127.0.0.1:{server.server_port}", "--progress", "plain",
                           "--json"])
    finally:
        server.shutdown()
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert json.loads(out)["records"] == 100 and "via the API" in err
    assert "rebuild: re-indexing" in err and "rebuild: done 100/100 (100%)" in err


async def test_offline_rebuild_with_the_stack_stopped(
        nats_url: str, topology: Topology, tr_home: Path, harness: Harness, model_path: Path,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    from totalrecall_embedder.core.backend import LlamaBackend

    # the stack's own Postgres under $TOTALRECALL_HOME/pg, as `totalrecall run` keeps it
    pg = PostgresServer(tr_home / "pg", port=free_port())
    pg.start()
    dsn = pg.create_database("totalrecall")
    model = LlamaBackend(model_path, n_threads=2)
    texts = ["nginx failed to start: port 80 in use", "disk /home is 95% full",
             "user prefers podman over docker", "wifi dropped after suspend",
             "postgres restarted after OOM kill", "kernel update to 6.8 installed",
             "ssh login from 10.0.0.5", "cron job backup failed with exit 2",
             "firefox crashed with SIGSEGV", "git push rejected: non-fast-forward"] * 6
    events = []
    for i, text in enumerate(texts):
        base = make_event(i, None, summary=f"{text} #{i}", age=timedelta(hours=i, minutes=1))
        ev = base.event.model_copy(update={"detail": ""})
        vec = model.embed([ev.embedding_text()])[0]
        events.append(EmbeddedEvent(event=ev, vector=vec, model=model.fingerprint))
    queries = model.embed(["web server will not start", "running out of disk space",
                           "container runtime preference", "network problems after sleep"])
    model.close()
    proc = IndexerProcess(nats_url=nats_url, pg_dsn=dsn, home=tr_home, topology=topology,
                          log_path=tmp_path / "indexer.log", fetch_timeout_s=0.3)
    try:
        proc.start()
        await proc.wait_healthy()
        await harness.publish(events)
        await wait_for(lambda: drained(harness, dsn, len(events)), timeout=60, what="indexed")
        before = await search_all(harness, queries, model=events[0].model)
        proc.stop()
        pg.stop()  # the whole stack is down now

        cli_env(monkeypatch, nats_url=f"nats://127.0.0.1:{free_port()}", pg_dsn=dsn,
                home=tr_home, topology=topology)
        rc = await asyncio.to_thread(rebuild_main, ["--progress", "plain", "--json",
                                                    "--model", str(model_path)])
        out, err = capsys.readouterr()
        assert rc == 0, err
        result = json.loads(out)
        assert "offline" in err and "starting Postgres" in err and "in this process" in err
        assert result["records"] == len(events) and result["embedded"] == len(events)
        assert result["model"] == events[0].model and set(result["optimized"]) == {"hot", "warm"}
        assert "rebuild: building HNSW" in err

        pg.start()
        proc.start()
        await proc.wait_healthy()
        after = await search_all(harness, queries, model=events[0].model)
        # Re-embedded in other batches (this test embedded one text per call): Q8_0 similarities
        # move by up to ~3e-3 with the batch shape, which may swap near-ties (the same text with
        # another "#i"); the answers must be the same otherwise.
        for a, b in zip(after, before, strict=True):
            assert_same_hits(a, b, tol=5e-3)
    finally:
        proc.stop()
        pg.stop()
