"""Pure logic of the embedder: backends, device choice, the query cache, batch planning, dedup,
the engine. What does I/O (the SQLite stores, the remote endpoint, llama.cpp's build probes) is
in `adapters/`."""

from .backend import (
    EmbedBackend,
    LlamaBackend,
    ModelUnavailable,
    default_prefixes,
    model_fingerprint,
)
from .batch import Incoming, Outgoing, Plan, plan_batch
from .dedup import DedupWindow, TemplateVectors, content_hash, event_template
from .device import DeviceChoice, choose_device
from .engine import Engine, EngineConfig
from .query_lru import QueryLRU

__all__ = [
    "DedupWindow", "DeviceChoice", "EmbedBackend", "Engine", "EngineConfig", "Incoming",
    "LlamaBackend", "ModelUnavailable", "Outgoing", "Plan", "QueryLRU", "TemplateVectors",
    "choose_device", "content_hash", "default_prefixes", "event_template", "model_fingerprint",
    "plan_batch",
]
