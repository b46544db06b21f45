"""MCP server exposing Total Recall memory tools over stdio (`python -m totalrecall_mcp`)."""

from .server import build_server, main

__all__ = ["build_server", "main"]
