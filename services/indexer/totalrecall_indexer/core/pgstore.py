"""Moved to `totalrecall_indexer.adapters.pgstore` (I/O does not live in core/). This name stays
for app.py until it imports from adapters/; delete it then."""

from ..adapters.pgstore import PgStore

__all__ = ["PgStore"]
