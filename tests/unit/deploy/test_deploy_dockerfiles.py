"""The recall API's image builds llama-cpp-python and the model as the embedder's does (its
question model must embed as the embedder does): the stages both have are the same text."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SHARED = ("prebuilt", "llama-wheel", "model")


def stages(dockerfile: Path) -> dict[str, str]:
    """Named stage -> its instructions (comments and blank lines left out)."""
    out: dict[str, list[str]] = {}
    name = None
    for line in dockerfile.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = re.match(r"FROM\s+\S+(?:\s+AS\s+(\S+))?", line, re.IGNORECASE)
        if m:
            name = m.group(1) or f"unnamed-{len(out)}"
            out[name] = []
        if name is not None:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def test_the_recall_api_builds_the_wheel_and_the_model_as_the_embedder_does() -> None:
    embedder = stages(ROOT / "services/embedder/Dockerfile")
    recall = stages(ROOT / "services/recall-api/Dockerfile")
    for name in SHARED:
        assert recall[name] == embedder[name], f"stage {name} differs"


def test_both_images_name_the_model_at_the_same_path() -> None:
    for svc in ("embedder", "recall-api"):
        text = (ROOT / "services" / svc / "Dockerfile").read_text()
        assert "TR_EMBEDDER_MODEL_PATH=/opt/totalrecall/models/all-MiniLM-L6-v2.q8_0.gguf" in text
