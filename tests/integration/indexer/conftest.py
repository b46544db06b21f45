"""Fixtures of the indexer integration tests (defined in indexer_it_helpers)."""

from indexer_it_helpers import harness, settings

__all__ = ["harness", "settings"]
