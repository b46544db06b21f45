"""HTTP routes: thin. Validate, call the service or a port, shape the answer. One module per
feature area; this package mounts them all under `/memory`."""

from __future__ import annotations

from fastapi import APIRouter

from . import admin, files, ingest, insights, recall, sessions
from .admin import health

router = APIRouter(prefix="/memory")
for _feature in (ingest, recall, admin, files, sessions, insights):
    router.include_router(_feature.router)

__all__ = ["health", "router"]
