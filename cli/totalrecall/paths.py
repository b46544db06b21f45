"""Where the local stack keeps its state."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """`$TOTALRECALL_HOME`, default `~/.local/share/totalrecall`."""
    return Path(os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")).expanduser()


def default_model_path() -> Path:
    return home() / "models" / "all-MiniLM-L6-v2.f16.gguf"
