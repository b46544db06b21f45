"""The stack `embedder_bench.py` and `query_path.py` both set up: a nats-server and a fresh
$TOTALRECALL_HOME in a temporary directory, the embedder service in its own process (as
`make run` starts it), and a connection to a test topology's streams with a consumer of the
embedded stream (what the embedder published)."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def bench_model(path: Path | None = None) -> Path:
    """The GGUF to bench (`--model`, else the one `totalrecall model build` made); exits when
    it is not there."""
    from totalrecall.paths import default_model_path

    model = path or default_model_path()
    if not model.is_file():
        sys.exit(f"no model at {model}: run `totalrecall model build`")
    return model


@contextlib.contextmanager
def nats_and_home(nats_url: str | None = None) -> Iterator[tuple[str, Path]]:
    """(the NATS URL, an empty home): a nats-server in a temporary directory unless `nats_url`
    is given; both gone afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        if nats_url is None:
            from totalrecall.infra import NatsServer, free_port

            server = NatsServer(Path(tmp) / "nats", port=free_port(),
                                monitor_port=free_port()).start()
            nats_url = server.url
        try:
            home = Path(tmp) / "home"
            home.mkdir()
            yield nats_url, home
        finally:
            if server is not None:
                server.stop()


@dataclass
class Bus:
    """A connection to a fresh test topology (streams ensured) and a pull consumer of its
    embedded stream that acknowledges nothing and starts at the first message."""

    url: str
    nc: Any
    js: Any
    topo: Any  # totalrecall_schema.Topology
    embedded: Any  # the pull subscription

    def embedder_settings(self, model: Path, **more: str) -> dict[str, str]:
        """`TR_EMBEDDER_` settings (lower case, without the prefix) for this topology, dedup
        off (every event is embedded)."""
        return {"nats_url": self.url, "subject_prefix": self.topo.prefix,
                "stream_prefix": self.topo.stream_prefix, "model_path": str(model), **more,
                "dedup_enabled": "false"}

    async def close(self) -> None:
        await self.nc.close()


async def connect_bus(url: str, tag: str, durable: str) -> Bus:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
    from totalrecall_schema import Topology, ensure_streams

    topo = Topology.for_test(f"{tag}{int(time.time())}")
    nc = await nats.connect(url)
    js = nc.jetstream()
    await ensure_streams(js, topo)
    sub = await js.pull_subscribe(
        topo.embedded_all, durable=durable, stream=topo.embedded_stream,
        config=ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.NONE,
                              deliver_policy=DeliverPolicy.ALL))
    return Bus(url=url, nc=nc, js=js, topo=topo, embedded=sub)


@contextlib.contextmanager
def embedder_process(settings: dict[str, str], home: Path) -> Iterator[str]:
    """`python -m totalrecall_embedder` with these `TR_EMBEDDER_` settings, as `make run` starts
    it: its own process (own GIL, own event loop), so the bench's publishing and draining do not
    sit in the service's way. Yields the service's base URL once /health answers."""
    import httpx
    from totalrecall.infra import free_port
    from totalrecall.infra.process import spawn, stop

    port = free_port()
    env = {**os.environ, "TOTALRECALL_HOME": str(home), "TR_EMBEDDER_HTTP_PORT": str(port),
           **{f"TR_EMBEDDER_{k.upper()}": v for k, v in settings.items()}}
    log = home / "embedder.log"
    proc = spawn([sys.executable, "-m", "totalrecall_embedder"], log_path=log, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the embedder exited: {log.read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the embedder did not become healthy in 120 s")
            time.sleep(0.1)
        yield base
    finally:
        stop(proc, timeout=60)
