"""The indexer's I/O: the Markdown daily log on disk, Postgres, the Zvec tiers."""
