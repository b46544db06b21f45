"""Pure logic of the embedder: backends, batch planning, dedup, the engine."""

from .backend import EmbedBackend, LlamaBackend, ModelUnavailable, model_fingerprint
from .batch import Incoming, Outgoing, Plan, plan_batch
from .dedup import DedupWindow, content_hash, normalise
from .engine import Engine, EngineConfig

__all__ = [
    "DedupWindow", "EmbedBackend", "Engine", "EngineConfig", "Incoming", "LlamaBackend",
    "ModelUnavailable", "Outgoing", "Plan", "content_hash", "model_fingerprint", "normalise",
    "plan_batch",
]
