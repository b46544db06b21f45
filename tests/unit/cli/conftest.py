"""The fake recall API every CLI verb test talks to (`cli_fake_api`)."""

from cli_fake_api import api

__all__ = ["api"]
