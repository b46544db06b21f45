"""Where the local stack keeps its state, and where it finds the embedding model."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = "~/.local/share/totalrecall"


def home() -> Path:
    """`$TOTALRECALL_HOME`, default `~/.local/share/totalrecall`."""
    return Path(os.environ.get("TOTALRECALL_HOME", DEFAULT_HOME)).expanduser()


#: The default model file, `totalrecall_schema.service_settings.DEFAULT_MODEL_FILE` (named here
#: again so that this module imports only the standard library; a test keeps the two equal).
DEFAULT_MODEL_FILE = "all-MiniLM-L6-v2.q8_0.gguf"


def model_store() -> Path:
    """The model store every home shares: `${XDG_CACHE_HOME:-~/.cache}/totalrecall/models`.
    `totalrecall model build` writes here, so a new `TOTALRECALL_HOME` finds the model too."""
    cache = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(cache).expanduser() / "totalrecall" / "models"


def model_candidates(name: str = DEFAULT_MODEL_FILE) -> list[Path]:
    """Where a model file is looked for, first found wins: the home's own `models/` (a model
    put there on purpose), the shared store, then the default home's `models/` (where builds
    went before the shared store existed)."""
    found = [home() / "models" / name, model_store() / name,
             Path(DEFAULT_HOME).expanduser() / "models" / name]
    return list(dict.fromkeys(found))


def default_model_path() -> Path:
    """The first candidate that exists, else the shared store (where a build will put it)."""
    return next((p for p in model_candidates() if p.is_file()), model_store() / DEFAULT_MODEL_FILE)
