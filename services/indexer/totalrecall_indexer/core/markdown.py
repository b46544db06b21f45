"""Moved to `totalrecall_indexer.adapters.markdown_log` (I/O does not live in core/). This name stays
for app.py until it imports from adapters/; delete it then."""

from ..adapters.markdown_log import MarkdownLog

__all__ = ["MarkdownLog"]
