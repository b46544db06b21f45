"""Pure(ish) logic of the indexer: Markdown log, Postgres store, Zvec tiers, search."""
