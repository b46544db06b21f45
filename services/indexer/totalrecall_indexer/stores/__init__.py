"""The indexer's three stores, as I/O adapters: the Markdown daily log on disk (the ground truth),
the Postgres mirror, and the Zvec tiers (with the guard around their HNSW builds)."""
