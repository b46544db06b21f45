"""Pure logic of the embedder: backends, device choice, caches, backfill journal, batch
planning, dedup, the engine."""

from .backend import (
    EmbedBackend,
    LlamaBackend,
    ModelUnavailable,
    default_prefixes,
    model_fingerprint,
)
from .backfill import BackfillJournal, Pending
from .batch import Incoming, Outgoing, Plan, plan_batch
from .cache import EmbeddingCache, QueryLRU
from .dedup import DedupWindow, TemplateVectors, content_hash, event_template
from .device import DeviceChoice, choose_device, gpu_offload_supported
from .engine import Engine, EngineConfig

__all__ = [
    "BackfillJournal", "DedupWindow", "DeviceChoice", "EmbedBackend", "EmbeddingCache", "Engine",
    "EngineConfig", "Incoming", "LlamaBackend", "ModelUnavailable", "Outgoing", "Pending", "Plan",
    "QueryLRU", "TemplateVectors", "choose_device", "content_hash", "default_prefixes",
    "event_template", "gpu_offload_supported", "model_fingerprint", "plan_batch",
]
