"""Moved to `totalrecall_indexer.stores.pgstore` (I/O does not live in core/). This name stays
for app.py until it imports from stores/; delete it then."""

from ..stores.pgstore import PgStore

__all__ = ["PgStore"]
