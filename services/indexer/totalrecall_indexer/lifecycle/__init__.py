"""The indexer from start to stop (`start_stop.Lifecycle`), its background loops (`loops.py`:
compaction, HNSW builds, re-indexing, MEMORY.md sync), and the offline rebuild the CLI runs while
the service is stopped (`offline_rebuild.py`)."""
