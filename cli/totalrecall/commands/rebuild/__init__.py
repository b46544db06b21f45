"""`totalrecall rebuild`: re-create Zvec and Postgres from the Markdown ground truth
(`memory/daily/*.md` and `memory/MEMORY.md`), with a progress bar.

- Stack running (an indexer answers on NATS): the indexer rebuilds itself (admin RPC `rebuild`);
  progress comes from `topology.rpc_index_progress`. With index partitions (`TR_PARTITIONS`),
  every partition's owner rebuilds its part and the answers of all of them are awaited.
  When only the HTTP API is reachable, `POST /memory/rebuild` is used and progress is polled
  from `GET /memory/stats`.
- Stack stopped: the rebuild runs here (`totalrecall_indexer.api.rebuild`). Postgres is
  started for the time of the rebuild if it is down and lives under `$TOTALRECALL_HOME/pg`.
  Vectors come from a running embedder (NATS) if there is one, else from the model file loaded
  here (`totalrecall_worker.llama_model`, the embedder's own model code), else the memories are
  stored unembedded (keyword search only).

Settings: the indexer's (`TR_INDEXER_NATS_URL`, `TR_INDEXER_PG_DSN`, `TOTALRECALL_HOME`, …), or
the ports `totalrecall run` uses (`TOTALRECALL_NATS_PORT`, `TOTALRECALL_POSTGRES_PORT`), or flags.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ...paths import DEFAULT_MODEL_FILE, default_model_path

EXIT_OK, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 2


# --- progress display -----------------------------------------------------------------------
class Progress:
    """Renders progress dicts (`{"phase", "done", "total", "elapsed_s", "finished"}`):
    a tqdm bar (`bar`), one line per phase / ~2 s (`plain`), or nothing (`none`)."""

    PHASES: ClassVar[dict[str, str]] = {
        "read": "reading logs", "index": "re-indexing", "memory_md": "MEMORY.md",
        "optimize": "building HNSW", "done": "done", "failed": "failed"}

    def __init__(self, mode: str = "auto", stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if getattr(self.stream, "isatty", lambda: False)() else "plain"
        self.mode = mode
        self.bar: Any = None
        self.phase: str | None = None
        self.last_line = 0.0
        self.last: dict[str, Any] | None = None
        self.lock = threading.Lock()

    def update(self, p: dict[str, Any]) -> None:
        with self.lock:
            self._update(p)

    def _update(self, p: dict[str, Any]) -> None:
        self.last = p
        phase = str(p.get("phase", ""))
        done, total = int(p.get("done") or 0), int(p.get("total") or 0)
        label = self.PHASES.get(phase, phase)
        if self.mode == "bar":
            if self.bar is None and total:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="mem", file=self.stream, dynamic_ncols=True,
                                desc=label)
            if self.bar is not None:
                if total and self.bar.total != total:
                    self.bar.total = total
                self.bar.set_description(label, refresh=False)
                self.bar.n = min(done, self.bar.total or done)
                self.bar.refresh()
        elif self.mode == "plain":
            now = time.monotonic()
            if phase != self.phase or now - self.last_line >= 2.0 or p.get("finished"):
                pct = f" ({100 * done / total:.0f}%)" if total else ""
                print(f"rebuild: {label} {done}/{total}{pct} {float(p.get('elapsed_s') or 0):.1f}s",
                      file=self.stream, flush=True)
                self.last_line = now
        self.phase = phase

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None


# --- settings -------------------------------------------------------------------------------
def resolve_settings(args: argparse.Namespace) -> Any:
    """The indexer's Settings: environment (as the services get it), `totalrecall run` ports,
    then flags."""
    from totalrecall_indexer.api import Settings

    over: dict[str, Any] = {}
    if args.nats_url:
        over["nats_url"] = args.nats_url
    elif "TR_INDEXER_NATS_URL" not in os.environ and os.environ.get("TOTALRECALL_NATS_PORT"):
        over["nats_url"] = f"nats://127.0.0.1:{os.environ['TOTALRECALL_NATS_PORT']}"
    if args.pg_dsn:
        over["pg_dsn"] = args.pg_dsn
    elif "TR_INDEXER_PG_DSN" not in os.environ and os.environ.get("TOTALRECALL_POSTGRES_PORT"):
        over["pg_dsn"] = ("postgresql://postgres@127.0.0.1:"
                          f"{os.environ['TOTALRECALL_POSTGRES_PORT']}/totalrecall")
    if args.home:
        over["home"] = Path(args.home).expanduser()
    return Settings(**over)


def _api_url(args: argparse.Namespace) -> str:
    return args.api or os.environ.get("TOTALRECALL_API") or (
        "http://127.0.0.1:" + os.environ.get("TOTALRECALL_API_PORT", "8765"))


# --- online: the running indexer rebuilds itself --------------------------------------------
async def _connect(url: str, probe: bool = True) -> Any:
    """A NATS connection; `probe`: fail within ~2 s, quietly, when nothing listens there."""
    import nats

    async def quiet(_exc: Exception) -> None:
        pass

    from totalrecall_schema.nats_url import connect_options

    # A cluster's nodes, comma-separated, with credentials (as the services take them).
    opts = connect_options(url)
    if probe:  # (max_reconnect_attempts=0 would retry forever in nats-py 2.x)
        return await nats.connect(**opts, connect_timeout=2, max_reconnect_attempts=1,
                                  reconnect_time_wait=0.1, error_cb=quiet)
    return await nats.connect(**opts, connect_timeout=3, error_cb=quiet)


async def _indexer_answers(settings: Any) -> bool:
    """Is an indexer answering admin requests on NATS? False when NATS is down too."""
    from totalrecall_schema import AdminReply, AdminRequest

    try:
        nc = await _connect(settings.nats_url)
    except Exception:
        return False
    try:
        msg = await nc.request(settings.topology.rpc_index_admin,
                               AdminRequest(verb="stats").model_dump_json().encode(), timeout=3)
        return AdminReply.model_validate_json(msg.data).ok
    except Exception:
        return False
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


async def rebuild_via_nats(settings: Any, view: Progress, timeout: float) -> dict[str, Any]:
    """Ask the running indexer to rebuild; follow its progress until it is finished."""
    import nats
    from totalrecall_schema import AdminReply, AdminRequest

    topo = settings.topology
    nc = await _connect(settings.nats_url, probe=False)
    finished = asyncio.Event()
    final: dict[str, Any] = {}

    async def on_progress(msg: Any) -> None:
        try:
            p = json.loads(msg.data)
        except ValueError:
            return
        if p.get("job") != "rebuild":
            return
        view.update(p)
        if p.get("finished"):
            final.update(p)
            finished.set()

    sub = await nc.subscribe(topo.rpc_index_progress, cb=on_progress)
    try:
        req = AdminRequest(verb="rebuild").model_dump_json().encode()
        if topo.partitions > 1:
            return await _rebuild_partitions(nc, topo, req, timeout)
        try:
            msg = await nc.request(topo.rpc_index_admin, req, timeout=timeout)
        except (TimeoutError, nats.errors.TimeoutError):
            # Still running: keep following the published progress.
            await asyncio.wait_for(finished.wait(), timeout=timeout)
            return _from_progress(final)
        reply = AdminReply.model_validate_json(msg.data)
        if not reply.ok and "already running" in (reply.error or ""):
            print("a rebuild is already running; following it", file=sys.stderr)
            await asyncio.wait_for(finished.wait(), timeout=timeout)
            return _from_progress(final)
        if not reply.ok:
            raise RuntimeError(reply.error or "rebuild failed")
        with contextlib.suppress(TimeoutError):  # let the last progress message arrive
            await asyncio.wait_for(finished.wait(), timeout=2)
        view.update({"job": "rebuild", "phase": "done", "done": reply.result.get("records", 0),
                     "total": reply.result.get("records", 0), "finished": True,
                     "elapsed_s": reply.result.get("took_s", 0)})
        return dict(reply.result)
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        with contextlib.suppress(Exception):
            await nc.close()


async def _rebuild_partitions(nc: Any, topo: Any, req: bytes, timeout: float
                              ) -> dict[str, Any]:
    """A partitioned index: every partition's owner rebuilds its part from its own Markdown
    logs, and answers once done; the answers are merged (records summed). The first answer
    is not enough: a standby answers at once, for no partition, having done nothing."""
    from totalrecall_schema import AdminReply
    from totalrecall_schema.partition_rpc import admin_partitions, gather, merge_admin_replies

    replies = await gather(nc, topo.rpc_index_admin, req, timeout, topo.partitions,
                           AdminReply.model_validate_json, admin_partitions)
    reply = merge_admin_replies("rebuild", replies, topo.partitions)
    if not reply.ok:
        raise RuntimeError(reply.error or "rebuild failed")
    return dict(reply.result)


def _from_progress(p: dict[str, Any]) -> dict[str, Any]:
    if p.get("phase") == "failed":
        raise RuntimeError(str(p.get("error") or "rebuild failed"))
    return dict(p.get("result") or p)


def rebuild_via_api(api: str, view: Progress, timeout: float) -> dict[str, Any]:
    """POST /memory/rebuild (blocking) while polling GET /memory/stats for the progress. If the
    HTTP call gives up first (the API waits at most its admin timeout), follow the job to its
    end through the stats."""
    import httpx

    token = os.environ.get("TOTALRECALL_API_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    outcome: dict[str, Any] = {}

    def progress(http: httpx.Client) -> dict[str, Any] | None:
        try:
            p = http.get(f"{api}/memory/stats").json().get("index", {}).get("rebuild")
        except Exception:
            return None
        return p if isinstance(p, dict) and p.get("job") == "rebuild" else None

    def post() -> None:
        try:
            r = httpx.post(f"{api}/memory/rebuild", json={}, headers=headers, timeout=timeout)
            outcome["status"], outcome["body"] = r.status_code, r.json()
        except Exception as exc:
            outcome["error"] = exc

    with httpx.Client(headers=headers, timeout=5) as http:
        before = (progress(http) or {}).get("started_at")  # an earlier, finished job
        worker = threading.Thread(target=post, daemon=True)
        worker.start()
        deadline = time.monotonic() + timeout
        job_end: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            worker.join(timeout=1.0)
            p = progress(http)
            if p is not None and p.get("started_at") != before:
                view.update(p)
                if p.get("finished"):
                    job_end = p
            if worker.is_alive():
                continue
            body = outcome.get("body") or {}
            if outcome.get("status") == 200 and body.get("ok"):
                return dict(body.get("result") or {})
            if job_end is not None:
                return _from_progress(job_end)
            if "error" in outcome or outcome.get("status") == 503:
                if p is not None and p.get("started_at") != before:
                    time.sleep(1.0)  # the HTTP call gave up, the job did not: keep following it
                    continue
                raise RuntimeError(f"API: {outcome.get('error') or body}")
            raise RuntimeError(str(body.get("error") or body.get("detail") or body))
    raise TimeoutError(f"rebuild did not finish within {timeout:.0f}s")


# --- offline: the stack is stopped ----------------------------------------------------------
@contextlib.contextmanager
def postgres_running(settings: Any) -> Iterator[str | None]:
    """Yield None when Postgres answers at settings.pg_dsn; else start the one under
    `$TOTALRECALL_HOME/pg` for the duration (yields "started"), or raise."""
    import socket

    u = urlsplit(settings.pg_dsn)
    host, port = u.hostname or "127.0.0.1", u.port or 5432
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=2):
        yield None
        return
    data = Path(settings.home) / "pg"
    if host not in ("127.0.0.1", "localhost", "::1") or not (data / "data" / "PG_VERSION").exists():
        raise RuntimeError(f"Postgres is not reachable at {host}:{port} and there is no local "
                           f"database under {data}")
    from totalrecall.infra import PostgresServer

    server = PostgresServer(data, port=port)
    print(f"starting Postgres ({data}) for the rebuild", file=sys.stderr)
    server.start()
    try:
        yield "started"
    finally:
        server.stop()


def local_embed_fn(model_path: Path, threads: int = 2) -> Any:
    """An EmbedFn over the model file, loaded in this process (no embedder service)."""
    from totalrecall_schema import EmbedReply
    from totalrecall_worker.llama_model import LlamaBackend

    backend = LlamaBackend(model_path, n_threads=threads)
    lock = asyncio.Lock()

    async def embed(texts: list[str]) -> EmbedReply:
        async with lock:
            vectors = await asyncio.to_thread(backend.embed, texts)
        return EmbedReply(vectors=vectors, model=backend.fingerprint, dim=backend.dim)

    embed.close = backend.close  # type: ignore[attr-defined]
    return embed


async def _nats_embedder(settings: Any) -> tuple[Any, Any] | None:
    """(nc, embed) when an embedder answers `rpc_embed_batch`, else None."""
    from totalrecall_indexer.api import nats_embed_fn
    from totalrecall_schema import EmbedReply, EmbedRequest

    try:
        nc = await _connect(settings.nats_url)
    except Exception:
        return None
    try:
        msg = await nc.request(settings.topology.rpc_embed_batch,
                               EmbedRequest(texts=["ping"], kind="document")
                               .model_dump_json().encode(), timeout=10)
        if EmbedReply.model_validate_json(msg.data).vectors:
            return nc, nats_embed_fn(nc, settings)
    except Exception:
        pass
    await nc.close()
    return None


def _model_path(args: argparse.Namespace, settings: Any) -> Path:
    if args.model:
        return Path(args.model).expanduser()
    env = os.environ.get("TR_EMBEDDER_MODEL_PATH")
    if env:
        return Path(env)
    # The rebuilt home's own model, else the shared store (what `totalrecall run` would load).
    own = Path(settings.home) / "models" / DEFAULT_MODEL_FILE
    return own if own.is_file() else default_model_path()


async def rebuild_offline(settings: Any, args: argparse.Namespace,
                          view: Progress) -> dict[str, Any]:
    from totalrecall_indexer.api import rebuild

    async def progress(p: dict[str, Any]) -> None:
        view.update(p)

    nc: Any = None
    embed: Any = None
    closer: Any = None
    if args.embedder in ("auto", "nats"):
        found = await _nats_embedder(settings)
        if found is not None:
            nc, embed = found
            print("embedding through the running embedder", file=sys.stderr)
        elif args.embedder == "nats":
            raise RuntimeError("no embedder answers on NATS")
    if embed is None and args.embedder in ("auto", "local"):
        path = _model_path(args, settings)
        if path.exists():
            try:
                local = await asyncio.to_thread(local_embed_fn, path, args.threads)
                embed, closer = local, local.close
                print(f"embedding with {path} in this process", file=sys.stderr)
            except Exception as exc:  # embedder package missing, model unloadable
                if args.embedder == "local":
                    raise RuntimeError(f"cannot embed locally: {exc}") from exc
                print(f"cannot embed locally: {exc}", file=sys.stderr)
        elif args.embedder == "local":
            raise RuntimeError(f"no model at {path}")
    if embed is None:
        print("warning: no embedder and no model: memories are stored without vectors "
              "(keyword search only); rebuild again once the model is there", file=sys.stderr)
    try:
        return await rebuild(settings, use_embedder=False, embed=embed, progress=progress,
                             optimize=not args.no_optimize)
    finally:
        if closer is not None:
            closer()
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()


# --- entry point ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="totalrecall rebuild",
        description="Re-create Zvec and Postgres from the Markdown ground truth "
                    "(memory/daily/*.md, memory/MEMORY.md).")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--online", action="store_true",
                      help="require the running stack (fail if no indexer answers)")
    mode.add_argument("--offline", action="store_true",
                      help="rebuild in this process (the indexer must be stopped)")
    p.add_argument("--nats-url", help="default: TR_INDEXER_NATS_URL or nats://127.0.0.1:4222")
    p.add_argument("--pg-dsn", help="default: TR_INDEXER_PG_DSN or the local stack's")
    p.add_argument("--home", help="state directory (default $TOTALRECALL_HOME)")
    p.add_argument("--api", help="recall API, used when NATS is not reachable "
                                 "(default $TOTALRECALL_API or http://127.0.0.1:8765)")
    p.add_argument("--embedder", choices=["auto", "nats", "local", "none"], default="auto",
                   help="offline: where vectors come from (default: running embedder, else the "
                        "model file in this process)")
    p.add_argument("--model", help="offline: model file (default the stack's)")
    p.add_argument("--threads", type=int, default=2, help="offline: embedding threads")
    p.add_argument("--no-optimize", action="store_true",
                   help="offline: skip the HNSW build at the end (searches brute-force until "
                        "the indexer builds it)")
    p.add_argument("--timeout", type=float, default=6 * 3600, help="seconds (default 6 h)")
    p.add_argument("--progress", choices=["auto", "bar", "plain", "none"], default="auto")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    """`totalrecall rebuild [options]`; returns the exit code."""
    args = build_parser().parse_args(argv)
    view = Progress(args.progress)
    try:
        settings = resolve_settings(args)
        how = "offline"
        if not args.offline:
            if asyncio.run(_indexer_answers(settings)):
                how = "nats"
            elif _api_answers(_api_url(args)):
                how = "api"
            elif args.online:
                print("no running indexer answers (NATS or API)", file=sys.stderr)
                return EXIT_UNREACHABLE
        print(f"rebuild: {'the running indexer' if how != 'offline' else 'offline'}"
              f"{' via the API' if how == 'api' else ''} — state in {settings.home}",
              file=sys.stderr)
        t0 = time.monotonic()
        if how == "nats":
            result = asyncio.run(rebuild_via_nats(settings, view, args.timeout))
        elif how == "api":
            result = rebuild_via_api(_api_url(args), view, args.timeout)
        else:
            with postgres_running(settings):
                result = asyncio.run(rebuild_offline(settings, args, view))
    except KeyboardInterrupt:
        view.close()
        print("interrupted", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        view.close()
        msg = str(exc)
        if "lock" in msg.lower():
            msg += " (is the indexer still running? stop it or run without --offline)"
        print(f"rebuild failed: {msg}", file=sys.stderr)
        return EXIT_FAILED
    view.close()
    result.setdefault("mode", how)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(_summary(result, time.monotonic() - t0))
    return EXIT_OK


def _api_answers(api: str) -> bool:
    import httpx

    try:
        r = httpx.get(f"{api}/memory/stats", timeout=3)
        index = r.json().get("index", {}) if r.status_code == 200 else {}
        return bool(index) and "error" not in index
    except Exception:
        return False


def _summary(r: dict[str, Any], took: float) -> str:
    md = r.get("memory_md") or {}
    parts = [f"rebuilt {r.get('records', 0)} memories from the daily logs "
             f"({r.get('embedded', 0)} embedded, {r.get('unembedded', 0)} without vectors)"]
    if md:
        parts.append(f"{md.get('entries', 0)} from MEMORY.md")
    if r.get("model"):
        parts.append(f"model {r['model']}")
    if r.get("optimized"):
        parts.append("HNSW built: " + ", ".join(f"{t} {s:.1f}s"
                                                for t, s in r["optimized"].items()))
    return "; ".join(parts) + f" in {took:.1f}s"


if __name__ == "__main__":
    raise SystemExit(main())
