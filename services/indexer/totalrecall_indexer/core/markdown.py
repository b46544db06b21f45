"""Moved to `totalrecall_indexer.stores.markdown_log` (I/O does not live in core/). This name stays
for app.py until it imports from stores/; delete it then."""

from ..stores.markdown_log import MarkdownLog

__all__ = ["MarkdownLog"]
