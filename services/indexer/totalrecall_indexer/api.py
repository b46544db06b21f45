"""The indexer's public entry points: all that code outside the service may import.

The CLI (`totalrecall rebuild`), the benchmarks and the evals use the indexer through these names
only, never its modules; everything else in the package may change without notice. A unit test
(`tests/unit/cli/test_service_entry_points.py`) fails when cli/, eval/ or bench/ import anything
else of a service.

- `Settings`: the indexer's settings (`TR_INDEXER_*`).
- `rebuild`: re-create Zvec and Postgres from the Markdown ground truth while the service is
  stopped (`lifecycle/offline_rebuild.py`); `nats_embed_fn`: its vectors from the running embedder over NATS.
- `create_app`: the service itself, in this process (the indexer benchmark).
- For benchmarks of the vector store alone: `ZvecTiers` (the tiers), `TierFilter` (a search's
  filter), and the Zvec collection's schema (`ZDoc` and its `to_doc`, `VECTOR`, `OUTPUT_FIELDS`,
  `QUANTIZE`, `collection_schema`, `init_zvec`).

Each name is imported when first used: `Settings` alone does not load Zvec.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .adapters.nats_clients import nats_embed_fn
    from .adapters.zvec_schema import (
        OUTPUT_FIELDS,
        QUANTIZE,
        VECTOR,
        ZDoc,
        collection_schema,
        init_zvec,
        to_doc,
    )
    from .adapters.zvec_tiers import ZvecTiers
    from .app import create_app
    from .core.search import TierFilter
    from .lifecycle.offline_rebuild import rebuild
    from .settings import Settings

#: Public name -> the module (relative to this package) that defines it.
_WHERE = {
    "Settings": ".settings", "rebuild": ".lifecycle.offline_rebuild",
    "nats_embed_fn": ".adapters.nats_clients", "create_app": ".app", "TierFilter": ".core.search",
    "ZvecTiers": ".adapters.zvec_tiers",
    "ZDoc": ".adapters.zvec_schema", "VECTOR": ".adapters.zvec_schema",
    "OUTPUT_FIELDS": ".adapters.zvec_schema", "QUANTIZE": ".adapters.zvec_schema",
    "collection_schema": ".adapters.zvec_schema", "init_zvec": ".adapters.zvec_schema",
    "to_doc": ".adapters.zvec_schema",
}

__all__ = ["OUTPUT_FIELDS", "QUANTIZE", "VECTOR", "Settings", "TierFilter", "ZDoc", "ZvecTiers",
           "collection_schema", "create_app", "init_zvec", "nats_embed_fn", "rebuild", "to_doc"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __package__), name)
