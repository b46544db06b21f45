"""Routes over the Markdown ground truth: a daily log or MEMORY.md, and one memory's record."""

from __future__ import annotations

import asyncio
from datetime import UTC
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field
from totalrecall_schema import memory_key
from totalrecall_schema.api import read_scope
from totalrecall_schema.events import NAMESPACE_PATTERN

from ..adapters.citations import scoped_text
from ..core import memory_md
from .common import C

router = APIRouter()


class FileRequest(BaseModel):
    path: str = Field(min_length=1, max_length=1024)
    #: Whose memories a daily log shows (as for recall: `namespaces` adds readable ones, e.g.
    #: a shared namespace; given alone, the default namespace is not added).
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)
    namespaces: list[Annotated[str, Field(pattern=NAMESPACE_PATTERN)]] | None = Field(
        default=None, max_length=16)

    def scope(self) -> list[str]:
        return read_scope(self.namespace, self.namespaces, "namespace" in self.model_fields_set)

@router.post("/file")
async def read_file(c: C, body: FileRequest) -> dict[str, str]:
    """A file of the Markdown ground truth; missing → empty text. A daily log shows only the
    caller's namespaces' memories, MEMORY.md only their sections (other lines are empty, so
    line numbers hold); nothing else in the memory directory is served."""
    root = c.settings.memory_dir.resolve()
    rel = body.path.removeprefix("memory/")
    try:
        target = (root / rel).resolve() if not Path(rel).is_absolute() else Path(rel).resolve()
        if root not in (target, *target.parents):
            raise HTTPException(400, detail="path must be inside the memory directory")
        if not target.is_file():
            return {"path": body.path, "text": ""}
        text = target.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError) as exc:  # a NUL byte, a name over NAME_MAX, …
        raise HTTPException(400, detail=f"unusable path: {type(exc).__name__}: {exc}") from None
    if target.parent == root / "daily":
        return {"path": body.path, "text": scoped_text(text, body.scope())}
    if target == root / "MEMORY.md":
        return {"path": body.path,
                "text": memory_md.scoped(text, body.scope(), c.settings.memory_md_namespace)}
    raise HTTPException(403, detail="only MEMORY.md and the daily logs (daily/*.md) are served")

@router.get("/source")
async def source(c: C, memory_id: Annotated[str, Query(alias="id", min_length=1, max_length=200)],
                 namespace: Annotated[str, Query(pattern=NAMESPACE_PATTERN)] = "default"
                 ) -> dict[str, Any]:
    """The Markdown record of one memory in its daily log (the ground truth), with its path
    and line range. Only a memory of `namespace` is found; 404 when there is none (or it was
    forgotten)."""
    found = await c.store.rows([memory_key(namespace, memory_id)])
    m = next(iter(found.values()), None)
    if m is None or m.namespace != namespace:
        raise HTTPException(404, detail=f"no memory {memory_id!r} in namespace {namespace!r}")
    day = f"{m.timestamp.astimezone(UTC):%Y-%m-%d}"
    record = await asyncio.to_thread(c.citations.source, namespace, memory_id, day)
    if record is None:
        raise HTTPException(404, detail=f"memory {memory_id!r} is not in "
                                        f"memory/daily/{day}.md (yet)")
    return {"id": memory_id, "namespace": namespace, "path": record.path,
            "startLine": record.start_line, "endLine": record.end_line, "text": record.text}
