"""Moved to `totalrecall_indexer.adapters.zvec_tiers` (I/O does not live in core/). This name stays
for app.py until it imports from adapters/; delete it then."""

from ..adapters.zvec_tiers import ZvecTiers

__all__ = ["ZvecTiers"]
