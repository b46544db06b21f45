"""Recall API settings (environment prefix TR_RECALL_; the shared ones in `ServiceSettings`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict
from totalrecall_schema import TierPolicy
from totalrecall_schema.service_settings import DEFAULT_MODEL_FILE, ServiceSettings

#: The indexer's setting of the namespace MEMORY.md's sections are indexed in by default.
MEMORY_MD_NAMESPACE_ENV = "TR_INDEXER_MEMORY_MD_NAMESPACE"

class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TR_RECALL_", extra="ignore")

    pg_dsn: str = "postgresql://postgres@127.0.0.1:5433/totalrecall"
    http_port: int = 8765
    api_token: str | None = Field(default=None, description="Bearer token; required off loopback")
    #: The indexer's Markdown logs (default `<home>/memory`): citations are read from there.
    memory_dir: Path = Field(default_factory=lambda data: _under_home(data, "memory"))
    #: The agent's hash-chained action ledger (POST/GET /memory/ledger; `totalrecall ledger
    #: verify`), and the namespace its entries are remembered in.
    ledger_path: Path = Field(default_factory=lambda data: _under_home(data, "ledger.jsonl"))
    ledger_namespace: str = Field(default="default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    #: The namespace of MEMORY.md's sections that name none (`<!-- namespace: x -->`): the
    #: indexer's `TR_INDEXER_MEMORY_MD_NAMESPACE`, read from its setting, never copied. The
    #: bundle of `/memory/warm` and `/memory/file` show a namespace only its own sections.
    memory_md_namespace: str = Field(
        default_factory=lambda: os.environ.get(MEMORY_MD_NAMESPACE_ENV) or "default",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

    #: Python's cyclic garbage collector: allocations between collections of the youngest
    #: generation (Python's default is 700). A recall allocates thousands of short-lived
    #: objects; a higher threshold (and the startup heap frozen) keeps full collections out of
    #: recall latency (docs/perf/2026-11-26-settings-notes.md). 0 keeps Python's defaults.
    gc_threshold: int = Field(default=50_000, ge=0)

    #: Admission control (recall/admission.py): recalls served at once, and how long another may wait
    #: for a slot before it is refused with 503 + Retry-After. 0 recalls: no limit.
    max_concurrent_recalls: int = Field(default=8, ge=0)
    recall_queue_wait_s: float = Field(default=2.0, gt=0)

    max_body_bytes: int = 2 * 1024 * 1024
    max_events_per_request: int = 1000

    # Short timeouts: a slow or missing embedder/indexer degrades recall to keyword search
    # instead of holding up the prompt. Searches that include the warm/cold tiers get longer
    # (the design's budgets: warm < 500 ms, cold < 2 s).
    embed_timeout_s: float = 1.0
    #: The vectors of questions asked lately, reused for this long (recall/query_vectors.py); a
    #: change of the embedder's model shows within it. 0 entries or 0 s: off.
    query_vector_cache_size: int = Field(default=1024, ge=0)
    query_vector_cache_s: float = Field(default=300.0, ge=0)
    #: A question's embedding made in this process (`adapters/query_model.py`) from the
    #: embedder's own model file, instead of a trip to the embedder: the file, query prefix and
    #: token limit are the embedder's settings (TR_EMBEDDER_MODEL_PATH, …_QUERY_PREFIX,
    #: …_QUERY_MAX_TOKENS), read, never copied. Used once a probe embedded both ways agrees;
    #: without the file, or off, every question goes to the embedder.
    query_model: bool = True
    query_model_path: Path = Field(default_factory=lambda data: Path(
        os.environ.get("TR_EMBEDDER_MODEL_PATH") or data["home"] / "models" / DEFAULT_MODEL_FILE
    ).expanduser())
    query_prefix: str | None = Field(
        default_factory=lambda: os.environ.get("TR_EMBEDDER_QUERY_PREFIX"))
    query_max_tokens: int = Field(
        default_factory=lambda: int(os.environ.get("TR_EMBEDDER_QUERY_MAX_TOKENS") or 128), ge=0)
    #: A learned linear map of a question's vector towards the memories that answer it
    #: (`recall/query_map.py`), applied before the vector search to the vectors of the model it
    #: was learned for; memories are embedded as they are. The default file ships with the
    #: recall API (`python -m eval.query_adapter build` makes it). Off by default: the map learned
    #: on LoCoMo alone raises LoCoMo's recall on conversations it has not seen, but costs LogQA,
    #: LongMemEval and the workstation set a few questions each (docs/eval.md). Off, or no such
    #: file: the question is searched as embedded.
    query_map: bool = False
    query_map_path: Path = Path(__file__).resolve().parent / "models" / \
        "all-MiniLM-L6-v2.query-map.npz"
    #: Threads of the question's embedding; a long prompt's (see `long_query_chars`) is spread
    #: over `query_parallel_threads` while nothing else on the machine runs (the embedder's rule).
    query_model_threads: int = Field(default=1, ge=1)
    query_parallel_threads: int = Field(default=2, ge=1)
    #: Contexts of the query model, each embedding one question at a time (0: one per usable
    #: core): questions asked at once are embedded at once, not queued behind one thread.
    query_model_contexts: int = Field(default=0, ge=0)
    #: The interpreter's thread switch interval (s) while the query model is loaded: the
    #: question's thread, back from llama.cpp, takes the GIL from the event loop within it
    #: (Python's 5 ms default is that much on every recall whose loop is busy meanwhile).
    gil_switch_interval_s: float = Field(default=0.0005, gt=0, le=0.1)
    # A query this long (characters; an agent's whole prompt, not a search phrase) is embedded
    # first, alone, and its keyword search starts once the vector is back: the embedder may then
    # spread it over both cores (EmbedRequest.exclusive) while the keyword search takes a
    # fraction of its time. Shorter queries run both at once (their embedding and the keyword
    # search take about as long). 0: always at once.
    long_query_chars: int = Field(default=160, ge=0)
    search_timeout_s: float = 1.0
    deep_search_timeout_s: float = 2.5
    pg_timeout_s: float = 2.0
    admin_timeout_s: float = 600.0
    # Postgres connections: a recall runs up to four statements at once (keyword search, rows,
    # profile, neighbours). Each of the two pools (plans per question, plans made once) opens
    # `pg_pool_min` at start, warmed up (`adapters/warm.py`): the first recalls after a start
    # then find them ready. `plan_cache_mode` for the pool's sessions ("" = server default).
    pg_pool_min: int = 10
    pg_pool_max: int = 10
    pg_plan_cache_mode: str = "force_custom_plan"

    # Fusion (the design's weighted sum) and MMR.
    # Measured on LoCoMo (docs/eval.md): keyword evidence is the stronger signal for memories;
    # similarity is min-max scaled per query so both components span 0–1.
    weight_vector: float = 0.35
    weight_bm25: float = 0.50
    weight_recency: float = 0.15
    half_life_hours: float = 168.0
    vector_norm: Literal["raw", "minmax"] = "minmax"
    # With min-max: similarities under this count as no vector evidence (the scale starts here).
    vector_floor: float = 0.2
    mmr_lambda: float = 0.7
    #: A conversation turn that its conclusion says again whole (a turn of one sentence) is
    #: shown once, as the conclusion (`core/derived.without_restated_turns`; false: both).
    restated_turns_once: bool = True
    #: Of the conclusions a question asks for ("what's my preference regarding X?"), those
    #: holding more of what it asks about first (`core/intent.conclusions_about_first`; false:
    #: the fused order).
    conclusions_by_topic: bool = True
    #: The newest memories of each template among the first results that recall adds when its
    #: searches did not return them (`core/repeats.with_newest_repeats`; 0: off).
    repeats_newest: int = Field(default=3, ge=0)
    vector_candidates: int = 40
    bm25_candidates: int = 40
    good_match_similarity: float = 0.35
    min_good_matches: int = 3
    min_score: float = 0.05
    # A memory needs this much evidence that it is about the query (`core.fusion.evidence`:
    # weighted similarity and keyword components, a named date, the diagnostic lift; not recency,
    # not the actor boosts) to be recalled. 0: every candidate may fill the answer.
    min_evidence: float = 0.01
    diagnostic_boost: float = 0.08
    # "What's using my CPU now?": a high_cpu/high_mem event of a process that has since ended
    # keeps this share of its score (1 = off). See core/supersede.py.
    superseded_factor: float = 0.3
    # A memory a newer one replaced (same subject, or named by it: core/supersede.py) keeps this
    # share of its score unless the question asks for history ("what did I use before?"); 0: it
    # is not recalled then (it stays stored, and a question about history finds it, marked).
    superseded_fact_factor: float = Field(default=0.0, ge=0.0, le=1.0)
    # Neighbour expansion (core/neighbours.py): the best `neighbour_hits` hits lend
    # `neighbour_weight` × their score to the `neighbour_window` memories either side of them in
    # the same thread (session, or source + service), at most `neighbour_max_gap_s` apart.
    neighbour_hits: int = 20
    neighbour_window: int = 2
    neighbour_weight: float = 0.5
    neighbour_decay: float = 1.0  # share × decay per step beyond the adjacent memory
    # The memory right after a hit that asks something, said by an actor the query names (the
    # answer to the matching question), gets this share of the hit's score when it is more than
    # `neighbour_weight` (the LoCoMo figures by share: docs/perf/2026-11-26-settings-notes.md).
    neighbour_answer_weight: float = 1.0
    neighbour_max_gap_s: float = 6 * 3600.0
    # Machine events (no session) are dense: their neighbours are the minutes around a hit, and a
    # short bound keeps the lookup a short index walk on a busy namespace. One subject's events
    # this close together are also one incident (`core/incidents.py`).
    neighbour_event_gap_s: float = 600.0
    # The user-profile block (the namespace's `user_pattern` memories) is read at most this often
    # per namespace (s): it changes rarely, and every recall shows it. 0: read on every recall.
    profile_cache_s: float = 5.0
    #: At most this many user patterns (the newest current ones) in the block.
    profile_max_patterns: int = Field(default=8, ge=0, le=50)
    #: Of those, at most this many preferences and corrections the user stated in a conversation
    #: (memories derived from turns, core/conclusions.py), the newest: the learned patterns keep
    #: their places.
    profile_max_stated: int = Field(default=3, ge=0, le=50)
    #: What a conversation concluded (diagnoses, fixes, the user's decisions, preferences and
    #: corrections) becomes memories of its own at ingest and flush (core/conclusions.py).
    conclusions_enable: bool = True
    #: The hosts a namespace's memories happened on (a question naming one ranks its memories
    #: first; the block names hosts once there are several) are read at most this often per
    #: namespace (s): a new machine is seen within this time and a recall later. Once known, an
    #: expired list is used while it is read again behind the recall. 0: read on every recall.
    hosts_cache_s: float = 30.0
    #: A question is embedded without the names of the people who speak in the namespace's
    #: conversations (core/speakers.py): the actor field matches who, the vector what. Those
    #: names are read at most every `speakers_cache_s` per namespace.
    embed_without_speakers: bool = True
    speakers_cache_s: float = 30.0
    #: The indexer's tier ages (`TR_INDEXER_HOT_MAX_AGE_S`, `TR_INDEXER_WARM_MAX_AGE_S`): which
    #: tiers hold the memories a timeframe reaches. Read from the indexer's settings, never copied.
    tier_policy: TierPolicy = Field(default_factory=TierPolicy.from_env)
    #: "Where were we": the latest session's memories at most this far apart are recalled.
    continuation_gap_s: float = 6 * 3600.0
    # Added to memories stamped on a date the query names ("on October 13, 2023", "in July").
    date_boost: float = 0.2
    # Added to memories whose actor the query names ("what did Caroline say…").
    actor_boost: float = 0.1
    # A question in the first person ("what did I say…", "my car"; not "…did you suggest", not
    # a diagnostic one) is about the user's own words: memories of this actor get `asker_boost`
    # (the LongMemEval figures by boost: docs/perf/2026-11-26-settings-notes.md).
    # Empty actor or 0: no such boost.
    asker_actor: str = "user"
    asker_boost: float = 0.3
    #: How long the counts of a question's words (BM25's IDF, `termstats`) are reused before
    #: they are read again (0: at every search). The store keeps them exact at every commit.
    term_stats_max_age_s: float = Field(default=10.0, ge=0)
    bm25_scan_cap: int = 500
    # The query's rarest `bm25_max_terms` lexemes are searched; lexemes in more than
    # `bm25_max_df_ratio` of all memories are dropped (near-stopwords: slow and uninformative).
    bm25_max_terms: int = 8
    bm25_max_df_ratio: float = 0.2
    # The BM25 component is the match's score over the best of the query, but over no less than
    # this share of the ideal match (every searched term): a weak best match stays weak.
    bm25_min_coverage: float = 0.3
    # Query words this long also match as prefixes (`nginx` → `nginx.service`); 0 turns it off.
    bm25_prefix_min_chars: int = 4

    # User-pattern learning (core/patterns.py, sessions/learning.py), the design's `patterns.*` options:
    # `enable`, `detectionInterval` (daily), `minObservations` (3). Each namespace's memories of
    # the last `patterns_window_days` (at most `patterns_max_memories`) are read; a pattern needs
    # `min_observations` and `min_confidence`. Times of day are in `patterns_timezone` (an IANA
    # name; empty: this machine's zone). `patterns_namespaces` empty: every namespace.
    patterns_enable: bool = True
    patterns_detection_interval_s: float = Field(default=86400.0, gt=0)
    patterns_first_delay_s: float = Field(default=300.0, ge=0)
    patterns_min_observations: int = Field(default=3, ge=1)
    patterns_min_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    patterns_active_share: float = Field(default=0.5, gt=0.0, le=1.0)
    patterns_max_evidence: int = Field(default=20, ge=1, le=100)
    patterns_window_days: float = Field(default=30.0, gt=0)
    patterns_max_memories: int = Field(default=20000, ge=100)
    patterns_timezone: str = ""
    patterns_namespaces: list[str] = Field(default_factory=list)

    # Session continuity (sessions/continuity_service.py): the session-start bundle of `/memory/warm` holds at
    # most `warm_essentials_max` lines of today's and yesterday's essentials and the first
    # `warm_memory_md_max_chars` of MEMORY.md; a finished session's summary (`/memory/session/end`)
    # is its best `session_summary_sentences` sentences, from at most `session_max_turns` turns.
    warm_essentials_max: int = Field(default=12, ge=0, le=200)
    warm_memory_md_max_chars: int = Field(default=8000, ge=0)
    session_summary_sentences: int = Field(default=5, ge=1, le=50)
    session_max_turns: int = Field(default=500, ge=1)

    # Proactive alerts (core/alerts.py): a background task examines the events of
    # `alerts_namespaces` and of every namespace recalled lately every `alerts_interval_s`;
    # recalls show the latest open alerts (at most `alerts_in_block`) without waiting on it.
    alerts_enabled: bool = True
    alerts_interval_s: float = Field(default=120.0, gt=0)
    alerts_namespaces: list[str] = Field(default_factory=lambda: ["default"])
    alerts_in_block: int = Field(default=3, ge=0)
    # disk_filling: storage reports read this far back; a rise projected to fill the
    # filesystem within `alerts_disk_full_days` makes the alert critical.
    alerts_disk_lookback_days: float = Field(default=30.0, gt=0)
    alerts_disk_full_days: float = Field(default=7.0, ge=0)
    # unit_failing: this many failures of one unit (service or timer) within the window.
    alerts_unit_failures: int = Field(default=3, ge=1)
    alerts_unit_window_h: float = Field(default=7 * 24.0, gt=0)
    # process_crashing: this many crashes of one process name within the window.
    alerts_crash_count: int = Field(default=3, ge=1)
    alerts_crash_window_h: float = Field(default=24.0, gt=0)
    # service_idle: a running unit with no event about it for this many days (0: off).
    alerts_idle_days: float = Field(default=21.0, ge=0)
    # reclaimable_space: the newest measure of what could be freed (the watchers' reclaimable
    # report: caches, the journal, old generations) at least this many bytes; advice only.
    alerts_reclaimable_bytes: int = Field(default=2 * 2**30, ge=0)
    # At most this many event rows per rule read per namespace and run (the newest).
    alerts_max_rows: int = Field(default=5000, ge=10)

    @property
    def loopback(self) -> bool:
        return self.http_host in {"127.0.0.1", "::1", "localhost"}


def _under_home(data: dict[str, Any], name: str) -> Path:
    return Path(data["home"]) / name
