"""The indexer's public entry points: all that code outside the service may import.

The CLI (`totalrecall rebuild`), the benchmarks and the evals use the indexer through these names
only, never its modules; everything else in the package may change without notice. A unit test
(`tests/unit/cli/test_service_entry_points.py`) fails when cli/, eval/ or bench/ import anything
else of a service.

- `Settings`: the indexer's settings (`TR_INDEXER_*`).
- `rebuild`: re-create Zvec and Postgres from the Markdown ground truth while the service is
  stopped (`rebuild.py`); `nats_embed_fn`: its vectors from the running embedder over NATS.
- `create_app`: the service itself, in this process (the indexer benchmark).
- For benchmarks of the vector store alone: `ZvecTiers` (the tiers), `TierFilter` (a search's
  filter), and the Zvec collection's schema (`ZDoc`, `VECTOR`, `OUTPUT_FIELDS`, `QUANTIZE`,
  `collection_schema`, `init_zvec`).

Each name is imported when first used: `Settings` alone does not load Zvec.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .adapters import nats_embed_fn
    from .app import create_app
    from .core.search import TierFilter
    from .rebuild import rebuild
    from .settings import Settings
    from .stores.zvec_schema import (
        OUTPUT_FIELDS,
        QUANTIZE,
        VECTOR,
        ZDoc,
        collection_schema,
        init_zvec,
    )
    from .stores.zvec_tiers import ZvecTiers

#: Public name -> the module (relative to this package) that defines it.
_WHERE = {
    "Settings": ".settings", "rebuild": ".rebuild", "nats_embed_fn": ".adapters",
    "create_app": ".app", "TierFilter": ".core.search", "ZvecTiers": ".stores.zvec_tiers",
    "ZDoc": ".stores.zvec_schema", "VECTOR": ".stores.zvec_schema",
    "OUTPUT_FIELDS": ".stores.zvec_schema", "QUANTIZE": ".stores.zvec_schema",
    "collection_schema": ".stores.zvec_schema", "init_zvec": ".stores.zvec_schema",
}

__all__ = ["OUTPUT_FIELDS", "QUANTIZE", "VECTOR", "Settings", "TierFilter", "ZDoc", "ZvecTiers",
           "collection_schema", "create_app", "init_zvec", "nats_embed_fn", "rebuild"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __package__), name)
