from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from totalrecall_schema import Topology


def _home() -> Path:
    return Path(os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")).expanduser()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TR_RECALL_", extra="ignore")

    nats_url: str = "nats://127.0.0.1:4222"
    pg_dsn: str = "postgresql://postgres@127.0.0.1:5433/totalrecall"
    subject_prefix: str = "memory"
    stream_prefix: str = "MEMORY"
    http_host: str = "127.0.0.1"
    http_port: int = 8765
    api_token: str | None = Field(default=None, description="Bearer token; required off loopback")
    memory_dir: Path = Field(default_factory=lambda: _home() / "memory")

    max_body_bytes: int = 2 * 1024 * 1024
    max_events_per_request: int = 1000

    # Short timeouts: a slow or missing embedder/indexer degrades recall to keyword search
    # instead of holding up the prompt. Searches that include the warm/cold tiers get longer
    # (the design's budgets: warm < 500 ms, cold < 2 s).
    embed_timeout_s: float = 1.0
    search_timeout_s: float = 1.0
    deep_search_timeout_s: float = 2.5
    pg_timeout_s: float = 2.0
    admin_timeout_s: float = 600.0

    # Fusion (the design's weighted sum) and MMR.
    weight_vector: float = 0.55
    weight_bm25: float = 0.30
    weight_recency: float = 0.15
    half_life_hours: float = 168.0
    mmr_lambda: float = 0.7
    vector_candidates: int = 40
    bm25_candidates: int = 40
    good_match_similarity: float = 0.35
    min_good_matches: int = 3
    min_score: float = 0.05
    diagnostic_boost: float = 0.08
    term_stats_refresh_s: float = 120.0
    bm25_scan_cap: int = 1000
    # Query words this long also match as prefixes (`nginx` → `nginx.service`); 0 turns it off.
    bm25_prefix_min_chars: int = 4

    @property
    def topology(self) -> Topology:
        return Topology(prefix=self.subject_prefix, stream_prefix=self.stream_prefix)

    @property
    def loopback(self) -> bool:
        return self.http_host in {"127.0.0.1", "::1", "localhost"}
