"""The indexer as a real subprocess (`python -m totalrecall_indexer`), as `totalrecall run` starts
it: for kill -9 tests and for the CLI against a running stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service_process import ServiceProcess
from totalrecall_schema import Topology


class IndexerProcess(ServiceProcess):
    def __init__(self, *, nats_url: str, pg_dsn: str, home: Path, topology: Topology,
                 log_path: Path, **settings: Any) -> None:
        self.home = home
        super().__init__(
            name="indexer", module="totalrecall_indexer", env_prefix="TR_INDEXER_",
            log_path=log_path, settings=settings,
            env={"TOTALRECALL_HOME": str(home), "TR_INDEXER_NATS_URL": nats_url,
                 "TR_INDEXER_PG_DSN": pg_dsn, "TR_INDEXER_SUBJECT_PREFIX": topology.prefix,
                 "TR_INDEXER_STREAM_PREFIX": topology.stream_prefix})
