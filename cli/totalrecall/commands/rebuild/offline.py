"""The rebuild run here, with the stack stopped (`totalrecall_indexer.api.rebuild`): Postgres is
started for the time of it if it is down (the one under `$TOTALRECALL_HOME/pg`); vectors come
from a running embedder (NATS) if there is one, else from the model file loaded in this process
(`totalrecall_worker.llama_model`, the embedder's own model code), else none (keyword search
only)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ...paths import DEFAULT_MODEL_FILE, default_model_path
from .online import connect
from .progress import Progress


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


async def nats_embedder(settings: Any) -> tuple[Any, Any] | None:
    """(nc, embed) when an embedder answers `rpc_embed_batch`, else None."""
    from totalrecall_indexer.api import nats_embed_fn
    from totalrecall_schema import EmbedReply, EmbedRequest

    try:
        nc = await connect(settings.nats_url)
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
        found = await nats_embedder(settings)
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

