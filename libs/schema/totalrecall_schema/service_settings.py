"""What every service's settings share: where NATS is, whose subjects and streams, where the
state lives, where /health and /metrics listen.

Each service's `Settings` inherits `ServiceSettings` with its own environment prefix
(`TR_EMBEDDER_`, `TR_INDEXER_`, `TR_RECALL_`, `TR_WATCHERS_`): `TR_INDEXER_NATS_URL` sets the
indexer's `nats_url`. Imported from here rather than the package root so that the schema's other
users (the client, the CLI) do not load pydantic-settings.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from .nats_url import connect_options
from .partitions import MAX_PARTITIONS
from .topology import MAX_REPLICAS, Topology

#: The embedding model's file under `$TOTALRECALL_HOME/models/`, the same for every part that
#: loads it (the embedder, the recall API's query model, the CLI): all-MiniLM-L6-v2 with int8
#: (Q8_0) weights. Same retrieval quality as f16 on LoCoMo (R@10 0.771 vs 0.766), a query embeds
#: ~35 % faster on one CPU thread.
DEFAULT_MODEL_FILE = "all-MiniLM-L6-v2.q8_0.gguf"

DEFAULT_HOME = "~/.local/share/totalrecall"

C = TypeVar("C")


def default_replicas() -> int | str:
    """`$TR_NATS_REPLICAS`, else 1: one variable for every service of an installation (they all
    create the streams, and must agree on their replica count); `TR_<SVC>_NATS_REPLICAS` still
    sets one service's."""
    return os.environ.get("TR_NATS_REPLICAS") or 1  # validated (and converted) as the field


def default_partitions() -> int | str:
    """`$TR_PARTITIONS`, else 1: every service of an installation must agree on it (the
    embedder publishes by it, indexers consume by it, recall asks by it)."""
    return os.environ.get("TR_PARTITIONS") or 1


def default_home() -> Path:
    """`$TOTALRECALL_HOME`, else ~/.local/share/totalrecall (read when settings are built)."""
    return Path(os.environ.get("TOTALRECALL_HOME", DEFAULT_HOME)).expanduser()


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore")

    #: One server, or a comma-separated list of a cluster's nodes, each with its credentials
    #: (`nats://u:p@n1:4222,nats://u:p@n2:4222`): nats-py authenticates with a URL's own
    #: credentials only, so a node the cluster merely announces refuses the reconnect when the
    #: node in use dies; a listed one takes it (`nats_servers`).
    nats_url: str = "nats://127.0.0.1:4222"
    #: Subjects are `<subject_prefix>.events.>`, … and streams `<stream_prefix>_EVENTS`, …
    #: (`Topology`); tests and side-by-side installations use their own.
    subject_prefix: str = "memory"
    stream_prefix: str = "MEMORY"
    #: Servers each stream is kept on (`Topology.replicas`): 1 for a single nats-server, 3 for
    #: the cluster of deploy/nats/cluster/. Default `$TR_NATS_REPLICAS`, else 1.
    nats_replicas: int = Field(default_factory=default_replicas, ge=1, le=MAX_REPLICAS,
                               validate_default=True)
    #: Partitions of the vector index (`totalrecall_schema.partitions`): 1 for one indexer; with
    #: more, each indexer owns some (`TR_INDEXER_PARTITIONS`). Default `$TR_PARTITIONS`, else 1.
    partition_count: int = Field(default_factory=default_partitions, ge=1, le=MAX_PARTITIONS,
                                 validate_default=True)
    #: /health and /metrics (each service sets its own port).
    http_host: str = "127.0.0.1"
    http_port: int
    #: State directory: default `$TOTALRECALL_HOME`.
    home: Path = Field(default_factory=default_home)

    @property
    def nats_servers(self) -> list[str]:
        """`nats_url`'s servers, as given (credentials and all)."""
        return [u.strip() for u in self.nats_url.split(",") if u.strip()]

    @property
    def nats_connect(self) -> dict[str, Any]:
        """`nats.connect`'s `servers` and credentials for `nats_url` (`nats_url.py`: the
        credentials go to every server, the ones the cluster announces too)."""
        return connect_options(self.nats_url)

    def nats_broker_options(self) -> dict[str, Any]:
        """FastStream's `NatsBroker` arguments for `nats_url` (as `nats_connect`)."""
        opts = dict(self.nats_connect)
        out: dict[str, Any] = {"servers": opts.pop("servers")}
        if "user" in opts:
            from faststream.security import SASLPlaintext

            out["security"] = SASLPlaintext(username=opts["user"], password=opts["password"])
        elif "token" in opts:
            out["token"] = opts["token"]
        return out

    @property
    def topology(self) -> Topology:
        return Topology(prefix=self.subject_prefix, stream_prefix=self.stream_prefix,
                        replicas=self.nats_replicas, partitions=self.partition_count)

    def section(self, config: type[C], **overrides: Any) -> C:
        """The core's config dataclass `config`, filled from the settings of the same names (so
        the core never sees the service's settings, and the environment names stay flat);
        `overrides` for the fields that need converting first."""
        fields = type(self).model_fields
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(config)  # type: ignore[arg-type]
                  if f.name in fields}
        return config(**{**values, **overrides})
