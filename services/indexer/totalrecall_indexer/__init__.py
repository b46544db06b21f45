"""Total Recall indexer: embedded events → Markdown daily log + Postgres + Zvec tiers."""

__version__ = "0.1.0"
