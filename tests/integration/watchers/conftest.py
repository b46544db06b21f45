"""Fixtures of the watchers integration tests (defined in watchers_it_helpers)."""

from watchers_it_helpers import reader

__all__ = ["reader"]
