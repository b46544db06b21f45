"""The rebuild done by the running indexer: asked over NATS (admin RPC `rebuild`, progress from
`topology.rpc_index_progress`; with index partitions every owner rebuilds its part and all the
answers are awaited), or over the HTTP API (`POST /memory/rebuild`, progress polled from
`GET /memory/stats`) when only the API is reachable."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
import time
from typing import Any

from .progress import Progress


async def connect(url: str, probe: bool = True) -> Any:
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


async def indexer_answers(settings: Any) -> bool:
    """Is an indexer answering admin requests on NATS? False when NATS is down too."""
    from totalrecall_schema import AdminReply, AdminRequest

    try:
        nc = await connect(settings.nats_url)
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
    nc = await connect(settings.nats_url, probe=False)
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



def api_answers(api: str) -> bool:
    import httpx

    try:
        r = httpx.get(f"{api}/memory/stats", timeout=3)
        index = r.json().get("index", {}) if r.status_code == 200 else {}
        return bool(index) and "error" not in index
    except Exception:
        return False

