"""Moved to `totalrecall_indexer.stores.zvec_tiers` (I/O does not live in core/). This name stays
for app.py until it imports from stores/; delete it then."""

from ..stores.zvec_tiers import ZvecTiers

__all__ = ["ZvecTiers"]
