"""Where the local stack keeps its state."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """`$TOTALRECALL_HOME`, default `~/.local/share/totalrecall`."""
    return Path(os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")).expanduser()


#: The default model file: all-MiniLM-L6-v2 with int8 (Q8_0) weights. Same retrieval quality as
#: f16 on LoCoMo (R@10 0.771 vs 0.766), a query embeds ~35 % faster on one CPU thread.
DEFAULT_MODEL_FILE = "all-MiniLM-L6-v2.q8_0.gguf"


def default_model_path() -> Path:
    return home() / "models" / DEFAULT_MODEL_FILE
