"""The embedder as a real subprocess (`python -m totalrecall_embedder`), configured through
`TR_EMBEDDER_*` like `totalrecall run` starts it: for kill -9 tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service_process import ServiceProcess
from totalrecall_schema import Topology


class EmbedderProcess(ServiceProcess):
    def __init__(self, *, nats_url: str, home: Path, topology: Topology, log_path: Path,
                 **settings: Any) -> None:
        super().__init__(
            name="embedder", module="totalrecall_embedder", env_prefix="TR_EMBEDDER_",
            log_path=log_path, settings=settings,
            env={"TOTALRECALL_HOME": str(home), "TR_EMBEDDER_NATS_URL": nats_url,
                 "TR_EMBEDDER_SUBJECT_PREFIX": topology.prefix,
                 "TR_EMBEDDER_STREAM_PREFIX": topology.stream_prefix})
